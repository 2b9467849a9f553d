// The group-cooperative operations (aperture/coop_rma.h) with the host's Coop, CoopHost, and the
// one back-off policy of every host wait (aperture/detail/backoff.h). Several "ranks" are
// simulated in one process, as in operations_test.cpp: each rank's copy is its own array, so a
// wrong peer or offset lands in the wrong array and shows as a wrong value.
#include <gtest/gtest.h>

#include "fake_world.h"

#include <aperture/coop.h>
#include <aperture/coop_rma.h>
#include <aperture/detail/backoff.h>
#include <aperture/detail/host_wait.h>
#include <aperture/error.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

constexpr int kRanks = 3;
constexpr std::size_t kCount = 301;  // odd: no power-of-two coincidence hides an offset bug

template <class T>
using FakeWorld = test::FakeWorld<T, kRanks, kCount>;

template <class T>
class CoopHostOps : public ::testing::Test {};
using Types = ::testing::Types<std::int32_t, std::uint64_t, float, double>;
TYPED_TEST_SUITE(CoopHostOps, Types);

TEST(CoopHost, IsOneThreadThatIsItsOwnGroup) {
  const aperture::CoopHost coop;
  static_assert(std::is_trivially_copyable_v<aperture::CoopHost>);
  static_assert(aperture::is_coop_v<aperture::CoopHost> && aperture::can_sync_v<aperture::CoopHost>);
  static_assert(!aperture::is_coop_v<int*>, "a pointer must not pick the group-cooperative overloads");
  EXPECT_EQ(coop.thread_rank(), 0u);
  EXPECT_EQ(coop.size(), 1u);
  EXPECT_EQ(coop.num_threads(), 1u);
  EXPECT_EQ(coop.meta_group_rank(), 0u);
  EXPECT_EQ(coop.meta_group_size(), 1u);
  EXPECT_TRUE(coop.all(true));
  EXPECT_FALSE(coop.all(false));
  EXPECT_EQ(coop.spins, aperture::detail::Backoff::kSpins);
}

TYPED_TEST(CoopHostOps, PutGetAndCopyMoveEveryElementToTheRightRank) {
  using T = TypeParam;
  const aperture::CoopHost coop;
  const int me = 1;
  for (int peer = 0; peer < kRanks; ++peer) {
    FakeWorld<T> w;
    std::vector<T> mine(kCount);
    for (std::size_t i = 0; i < kCount; ++i) mine[i] = static_cast<T>(7 * peer + 3 * i + 1);
    // put from element 5 on: a view into the middle of the allocation.
    aperture::put(coop, w.local(me) + 5, mine.data() + 5, kCount - 5, me, peer, w.bases.data());
    for (int r = 0; r < kRanks; ++r)
      for (std::size_t i = 0; i < kCount; ++i) {
        const T want = r == peer && i >= 5 ? mine[i] : FakeWorld<T>::value(r, i);
        ASSERT_EQ(w.copies[r][i], want) << "put to " << peer << ": rank " << r << " element " << i;
      }
    std::vector<T> got(kCount);
    aperture::get(coop, got.data(), w.local(me), kCount, me, peer, w.bases.data());
    for (std::size_t i = 0; i < kCount; ++i) ASSERT_EQ(got[i], w.copies[peer][i]) << "get from " << peer;
  }
  // The ranked copy: rank 2's copy into rank 0's, pointers in rank 1's address space.
  FakeWorld<T> w;
  aperture::copy(coop, w.local(me), w.local(me), kCount, /*src_rank=*/2, /*dst_rank=*/0, /*cur_rank=*/me,
                 w.bases.data());
  for (std::size_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(w.copies[0][i], FakeWorld<T>::value(2, i)) << "element " << i;
    ASSERT_EQ(w.copies[1][i], FakeWorld<T>::value(1, i)) << "the caller's copy is not touched";
  }
  // The local copy, overlapping (memmove semantics), and count 0.
  aperture::copy(coop, w.local(1) + 1, w.local(1), kCount - 1);
  EXPECT_EQ(w.copies[1][0], FakeWorld<T>::value(1, 0));
  for (std::size_t i = 1; i < kCount; ++i) ASSERT_EQ(w.copies[1][i], FakeWorld<T>::value(1, i - 1)) << i;
  aperture::put(coop, w.local(1), w.local(2), 0, 1, 2, w.bases.data());
  EXPECT_EQ(w.copies[2][0], FakeWorld<T>::value(2, 0));
}

TEST(CoopHost, DataPutBeforeTheGroupSignalIsVisibleAfterTheGroupWait) {
  // Two threads play two ranks, each with its own CoopHost: rank 0 puts a block and signals;
  // rank 1 waits, then reads every element.
  constexpr std::size_t kWords = 2048;
  std::array<std::vector<std::uint64_t>, 2> data{std::vector<std::uint64_t>(kWords), std::vector<std::uint64_t>(kWords)};
  std::array<std::uint64_t, 2> flags{0, 0};
  const std::array<std::int64_t, 2> data_bases{reinterpret_cast<std::int64_t>(data[0].data()),
                                               reinterpret_cast<std::int64_t>(data[1].data())};
  const std::array<std::int64_t, 2> flag_bases{reinterpret_cast<std::int64_t>(&flags[0]),
                                               reinterpret_cast<std::int64_t>(&flags[1])};
  for (std::uint64_t round = 1; round <= 30; ++round) {
    std::thread producer([&] {
      const aperture::CoopHost coop;
      std::vector<std::uint64_t> mine(kWords);
      for (std::size_t i = 0; i < kWords; ++i) mine[i] = round * 1000003 + i;
      aperture::put(coop, data[0].data(), mine.data(), kWords, 0, 1, data_bases.data());
      aperture::signal(coop, &flags[0], round, 0, 1, flag_bases.data());
    });
    const aperture::CoopHost coop{/*spins=*/16};
    EXPECT_TRUE(aperture::wait_until_ge_for(coop, &flags[1], round, 0));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < kWords; ++i) wrong += data[1][i] != round * 1000003 + i;
    EXPECT_EQ(wrong, 0u) << "round " << round << ": words not yet visible after the wait";
    EXPECT_EQ(flags[0], 0u) << "the signal went to rank 0's own flag";
    producer.join();
  }
}

TEST(CoopHost, AWaitThatGivesUpThrowsNamingTheFlag) {
  std::uint64_t flag = 4;
  const aperture::CoopHost coop;
  try {
    aperture::wait_until_ge_for(coop, &flag, 5, 5'000'000);  // 5 ms
    ADD_FAILURE() << "the wait should have given up";
  } catch (const aperture::Error& e) {
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("still holds 4"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(coop.wait(&flag, 4, 5'000'000));
}

TEST(Backoff, SpinsFirstThenGivesUpAfterTheTimeout) {
  // With a timeout of 0 the first `spins` pauses still return at once (no clock read yet); the
  // first clock read after them finds the time up.
  aperture::detail::Backoff backoff(0, 8);
  int pauses = 0;
  while (backoff.pause()) ++pauses;
  EXPECT_EQ(pauses, 8);
}

TEST(Backoff, SleepsOnceTheYieldPhaseIsOverAndAsksTheWatch) {
  // 200 ms: the 2 ms of yields, then a sleep every 64 polls; the watch runs before the first
  // sleep, then every 10 ms, and once more at the timeout. The wait is long against the 2 ms and
  // the 10 ms so that a thread descheduled for a while (a loaded CI machine) still sees the sleep
  // phase: at 30 ms a 40 ms preemption once skipped it whole.
  using namespace std::chrono;
  aperture::detail::Backoff backoff(duration_cast<nanoseconds>(milliseconds(200)).count(), 0);
  int watched = 0;
  long pauses = 0;
  const auto start = steady_clock::now();
  while (backoff.pause([&] { ++watched; })) ++pauses;
  const auto took = steady_clock::now() - start;
  EXPECT_GE(took, milliseconds(200));
  EXPECT_LT(took, milliseconds(5000));
  EXPECT_GE(watched, 2);  // at about 2, 12, ..., 192 ms and at 200 ms: 21 when nothing intervenes
  // Never more often than every 10 ms, plus the first and the last.
  EXPECT_LE(watched, duration_cast<milliseconds>(took).count() / 10 + 2);
  // Sleeping (20 us doubling to 1 ms) leaves far fewer polls than yielding all along would.
  EXPECT_LT(pauses, 1'000'000);
}

TEST(Backoff, AsksTheWatchOnceMoreWhenTheTimeoutHasPassed) {
  // A zero timeout has passed at the first clock read, before any sleep: the watch still runs,
  // so a wait that timed out names a dead peer if there is one.
  aperture::detail::Backoff quiet(0, 0);
  int watched = 0;
  EXPECT_FALSE(quiet.pause([&] { ++watched; }));
  EXPECT_EQ(watched, 1);
  aperture::detail::Backoff dead_peer(0, 0);
  try {
    dead_peer.pause([]() { throw aperture::Error(aperture::ErrorCode::peer_lost, "rank 3 died"); });
    ADD_FAILURE() << "the watch's error should end the wait";
  } catch (const aperture::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 3 died"), std::string::npos) << e.what();
  }
}

TEST(Backoff, AWatchThatThrowsEndsTheWait) {
  std::uint64_t flag = 0;
  aperture::detail::job_watch.store(+[]() -> std::string { return "rank 3 died"; });
  try {
    aperture::CoopHost{}.wait(&flag, 1, 10'000'000'000ull);  // 10 s, ended by the watch after ~2 ms
    ADD_FAILURE() << "the job watch should have ended the wait";
  } catch (const aperture::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 3 died"), std::string::npos) << e.what();
  }
  aperture::detail::job_watch.store(nullptr);
}

}  // namespace
