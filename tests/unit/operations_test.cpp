// The device operations on the host, with several "ranks" simulated in one process: each rank's
// copy of the allocation is a separate array, and the table holds their addresses. A wrong
// peer or offset lands in the wrong array and shows as a wrong value.
#include <gtest/gtest.h>

#include "fake_world.h"

#include <aperture/aperture.h>

#include <array>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

namespace {

constexpr int kRanks = 4;
constexpr std::size_t kCount = 257;  // odd, so no power-of-two coincidence hides an offset bug

template <class T>
using FakeWorld = test::FakeWorld<T, kRanks, kCount>;

template <class T>
class Operations : public ::testing::Test {};
using Types = ::testing::Types<std::int32_t, std::uint32_t, std::int64_t, std::uint64_t, float, double>;
TYPED_TEST_SUITE(Operations, Types);

TYPED_TEST(Operations, TranslateKeepsTheOffsetAndViewsTranslate) {
  using T = TypeParam;
  FakeWorld<T> w;
  for (int from = 0; from < kRanks; ++from)
    for (int to = 0; to < kRanks; ++to)
      for (std::size_t i = 0; i < kCount; i += 7) {
        T* remote = aperture::translate(w.local(from) + i, from, to, w.bases.data());
        EXPECT_EQ(remote, w.local(to) + i) << "from " << from << " to " << to << " element " << i;
      }
}

TYPED_TEST(Operations, LoadAndStoreReachEveryPeerAndEveryElement) {
  using T = TypeParam;
  FakeWorld<T> w;
  const int me = 1;
  for (int to = 0; to < kRanks; ++to)
    for (std::size_t i = 0; i < kCount; ++i) {
      EXPECT_EQ(aperture::load(w.local(me) + i, me, to, w.bases.data()), FakeWorld<T>::value(to, i));
      aperture::store(w.local(me) + i, static_cast<T>(7 * to + i), me, to, w.bases.data());
    }
  for (int to = 0; to < kRanks; ++to)
    for (std::size_t i = 0; i < kCount; ++i) EXPECT_EQ(w.copies[to][i], static_cast<T>(7 * to + i));
}

TYPED_TEST(Operations, PutGetAndCopyMoveWholeRanges) {
  using T = TypeParam;
  FakeWorld<T> w;
  std::vector<T> scratch(kCount);
  for (std::size_t i = 0; i < kCount; ++i) scratch[i] = static_cast<T>(5 * i + 3);
  // put: the caller (rank 0) writes scratch into rank 2's copy from element 10 on.
  aperture::put(w.local(0) + 10, scratch.data(), kCount - 10, 0, 2, w.bases.data());
  for (std::size_t i = 0; i < kCount; ++i)
    EXPECT_EQ(w.copies[2][i], i < 10 ? FakeWorld<T>::value(2, i) : static_cast<T>(5 * (i - 10) + 3));
  // get: rank 0 reads rank 3's copy.
  std::vector<T> got(kCount);
  aperture::get(got.data(), w.local(0), kCount, 0, 3, w.bases.data());
  for (std::size_t i = 0; i < kCount; ++i) EXPECT_EQ(got[i], FakeWorld<T>::value(3, i));
  // copy: rank 0 moves rank 1's elements 0..99 into rank 3's elements 100..199.
  aperture::copy(w.local(0) + 100, w.local(0), 100, /*src_rank=*/1, /*dst_rank=*/3, /*cur_rank=*/0, w.bases.data());
  for (std::size_t i = 0; i < kCount; ++i)
    EXPECT_EQ(w.copies[3][i], (i >= 100 && i < 200) ? FakeWorld<T>::value(1, i - 100) : FakeWorld<T>::value(3, i));
  // Zero elements touch nothing.
  aperture::put(w.local(0), scratch.data(), 0, 0, 1, w.bases.data());
  EXPECT_EQ(w.copies[1][0], FakeWorld<T>::value(1, 0));
}

TYPED_TEST(Operations, ArithmeticAtomicsReturnTheOldValue) {
  using T = TypeParam;
  using aperture::order;
  using aperture::scope;
  FakeWorld<T> w;
  const auto* b = w.bases.data();
  for (int to = 0; to < kRanks; ++to) {
    const std::size_t i = 3 + static_cast<std::size_t>(to);
    T* p = w.local(0) + i;
    const T start = FakeWorld<T>::value(to, i);
    EXPECT_EQ(aperture::atomic_add(p, T(5), 0, to, b), start);
    EXPECT_EQ(aperture::atomic_sub(p, T(2), 0, to, b, order::relaxed, scope::device), T(start + 5));
    EXPECT_EQ(aperture::atomic_max(p, T(start + 100), 0, to, b, order::seq_cst), T(start + 3));
    EXPECT_EQ(aperture::atomic_max(p, T(1), 0, to, b), T(start + 100));
    EXPECT_EQ(aperture::atomic_min(p, T(2), 0, to, b, order::acquire), T(start + 100));
    EXPECT_EQ(aperture::atomic_min(p, T(9), 0, to, b, order::release), T(2));
    EXPECT_EQ(aperture::atomic_xchg(p, T(40), 0, to, b), T(2));
    EXPECT_EQ(aperture::atomic_cas(p, T(41), T(50), 0, to, b), T(40)) << "a failed CAS returns what it found";
    EXPECT_EQ(w.copies[to][i], T(40));
    EXPECT_EQ(aperture::atomic_cas(p, T(40), T(50), 0, to, b, order::acq_rel, scope::block), T(40));
    EXPECT_EQ(w.copies[to][i], T(50));
    // Neighbours are untouched.
    EXPECT_EQ(w.copies[to][i - 1], FakeWorld<T>::value(to, i - 1));
    EXPECT_EQ(w.copies[to][i + 1], FakeWorld<T>::value(to, i + 1));
  }
}

template <class T>
class BitwiseAtomics : public ::testing::Test {};
using IntegralTypes = ::testing::Types<std::int32_t, std::uint32_t, std::int64_t, std::uint64_t>;
TYPED_TEST_SUITE(BitwiseAtomics, IntegralTypes);

TYPED_TEST(BitwiseAtomics, AndOrXor) {
  using T = TypeParam;
  FakeWorld<T> w;
  const auto* b = w.bases.data();
  for (int to = 0; to < kRanks; ++to) {
    T* p = w.local(2) + 20;
    const T start = FakeWorld<T>::value(to, 20);
    EXPECT_EQ(aperture::atomic_or(p, T(0x100), 2, to, b), start);
    EXPECT_EQ(aperture::atomic_and(p, T(0x1F0), 2, to, b), T(start | 0x100));
    EXPECT_EQ(aperture::atomic_xor(p, T(0x0F), 2, to, b), T((start | 0x100) & 0x1F0));
    EXPECT_EQ(w.copies[to][20], T(((start | 0x100) & 0x1F0) ^ 0x0F));
  }
}

TEST(Atomics, ConcurrentAddsFromManyThreadsAllLand) {
  FakeWorld<std::uint64_t> w;
  const auto* b = w.bases.data();
  constexpr int kThreads = 4, kAdds = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < kAdds; ++k) aperture::atomic_add(w.local(t) + 0, std::uint64_t{1}, t, 3, b);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(w.copies[3][0], FakeWorld<std::uint64_t>::value(3, 0) + kThreads * kAdds);
}

TEST(Signal, DataPutBeforeTheSignalIsVisibleAfterTheWait) {
  // Two threads play two ranks: rank 0 puts a block and signals; rank 1 waits, then reads.
  constexpr std::size_t kWords = 4096;
  std::array<std::vector<std::uint64_t>, 2> data{std::vector<std::uint64_t>(kWords), std::vector<std::uint64_t>(kWords)};
  std::array<std::uint64_t, 2> flags{0, 0};
  const std::array<std::int64_t, 2> data_bases{reinterpret_cast<std::int64_t>(data[0].data()),
                                               reinterpret_cast<std::int64_t>(data[1].data())};
  const std::array<std::int64_t, 2> flag_bases{reinterpret_cast<std::int64_t>(&flags[0]),
                                               reinterpret_cast<std::int64_t>(&flags[1])};
  for (std::uint64_t round = 1; round <= 50; ++round) {
    std::thread producer([&] {
      std::vector<std::uint64_t> mine(kWords);
      for (std::size_t i = 0; i < kWords; ++i) mine[i] = round * 1000003 + i;
      aperture::put(data[0].data(), mine.data(), kWords, 0, 1, data_bases.data());
      aperture::signal(&flags[0], round, 0, 1, flag_bases.data());
    });
    EXPECT_GE(aperture::wait_until_ge(&flags[1], round), round);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < kWords; ++i) wrong += data[1][i] != round * 1000003 + i;
    EXPECT_EQ(wrong, 0u) << "round " << round << ": words not yet visible after the wait";
    producer.join();
  }
}

TEST(Signal, BoundedWaitGivesUpAndReportsWhatItSaw) {
  std::uint64_t flag = 3;
  std::uint64_t seen = 0;
  EXPECT_FALSE(aperture::wait_until_ge_for(&flag, 4, 2'000'000, &seen));
  EXPECT_EQ(seen, 3u);
  EXPECT_TRUE(aperture::wait_until_ge_for(&flag, 3, 0, &seen));
}

TEST(Signal, HostWaitTimesOutWithAnError) {
  setenv("APERTURE_TIMEOUT", "0.05", 1);
  std::uint64_t flag = 1;
  try {
    aperture::wait_until_ge(&flag, 2);
    ADD_FAILURE() << "wait_until_ge should have timed out";
  } catch (const aperture::Error& e) {
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("still holds 1"), std::string::npos) << e.what();
  }
  setenv("APERTURE_TIMEOUT", "abc", 1);
  EXPECT_THROW(aperture::wait_until_ge(&flag, 2), aperture::Error);
  unsetenv("APERTURE_TIMEOUT");
}

TEST(PeerView, IsTriviallyCopyableAndMatchesTheFreeFunctions) {
  FakeWorld<std::int64_t> w;
  const aperture::PeerView peers{2, kRanks, w.bases.data()};
  for (int to = 0; to < kRanks; ++to) {
    EXPECT_TRUE(peers.is_direct(to));
    EXPECT_EQ(peers.translate(w.local(2) + 5, to), w.local(to) + 5);
    peers.store(w.local(2) + 6, std::int64_t{-to}, to);
    EXPECT_EQ(peers.load(w.local(2) + 6, to), -to);
    EXPECT_EQ(peers.atomic_add(w.local(2) + 7, std::int64_t{2}, to), FakeWorld<std::int64_t>::value(to, 7));
  }
  EXPECT_FALSE(peers.is_direct(kRanks));
  EXPECT_FALSE(peers.is_direct(-1));
}

}  // namespace
