// Every host provider through the same tests: the table invariant, every operation against
// every direct peer with values distinct per rank and element, cross-allocation translation
// (linear providers), views, bad requests, churn, and two providers in one loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <vector>

#include "host_provider_test.h"

namespace {

using aperture::Allocation;
using test::pattern;
using test::world;

class ProviderTest : public test::HostProviderTest {
 protected:
  void TearDown() override {
    if (provider_) world().barrier();  // nobody frees while a peer still reads
    for (auto& a : live_) provider_->free(a);
    provider_.reset();
  }
  Allocation& allocate(std::size_t bytes, std::size_t alignment = 256) {
    live_.push_back(provider_->allocate(bytes, alignment));
    return live_.back();
  }
  // Direct peers, self included, in rank order.
  std::vector<int> direct_peers(const aperture::SymmetricAddressMap& map) const {
    std::vector<int> peers;
    for (int r = 0; r < n_; ++r)
      if (map.is_direct(r)) peers.push_back(r);
    return peers;
  }

  std::vector<Allocation> live_;  // std::vector of a few: references taken only after all allocations
};

TEST_P(ProviderTest, TableInvariantAndEqualOffsets) {
  live_.reserve(2);
  const Allocation& a = allocate(4096 * sizeof(std::int64_t));
  const Allocation& b = allocate(1000);
  for (const Allocation* x : {&a, &b}) {
    EXPECT_EQ(x->map.local_rank, me_);
    EXPECT_EQ(x->map.world_size, n_);
    EXPECT_EQ(x->map.allocation_base, reinterpret_cast<std::uintptr_t>(x->ptr));
    EXPECT_EQ(x->map.host_peer_bases()[me_], static_cast<std::int64_t>(x->map.allocation_base));
    EXPECT_GE(x->map.allocation_bytes, x->bytes);
    EXPECT_TRUE(x->map.is_direct(me_));
    EXPECT_TRUE(x->map.owns(x->ptr, x->bytes));
  }
  if (!provider_->is_linear()) return;
  // Linear: the distance between two allocations is the same in every peer's copy.
  const std::int64_t distance = reinterpret_cast<std::int64_t>(b.ptr) - reinterpret_cast<std::int64_t>(a.ptr);
  for (int r : direct_peers(a.map))
    EXPECT_EQ(b.map.host_peer_bases()[r] - a.map.host_peer_bases()[r], distance) << "peer " << r;
  std::vector<std::int64_t> distances(n_);
  world().allgather(&distance, distances.data(), sizeof distance);
  for (int r = 0; r < n_; ++r) EXPECT_EQ(distances[r], distance) << "rank " << r << " got another offset";
}

TEST_P(ProviderTest, LoadStorePutGetCopyReachEveryDirectPeer) {
  constexpr std::size_t kCount = 3001;
  live_.reserve(2);
  Allocation& data = allocate(kCount * sizeof(std::int64_t));
  Allocation& inbox = allocate(n_ * kCount * sizeof(std::int64_t));
  auto* mine = data.as<std::int64_t>();
  auto* slots = inbox.as<std::int64_t>();
  const auto* bases = data.map.peer_bases();
  const auto* inbox_bases = inbox.map.peer_bases();
  const auto peers = direct_peers(data.map);
  for (std::size_t i = 0; i < kCount; ++i) mine[i] = pattern<std::int64_t>(me_, i);
  world().barrier();

  // load: read every direct peer's copy, element by element.
  for (int r : peers)
    for (std::size_t i = 0; i < kCount; ++i)
      ASSERT_EQ(aperture::load(mine + i, me_, r, bases), pattern<std::int64_t>(r, i)) << "peer " << r << " i " << i;
  // get: the same, in one call.
  std::vector<std::int64_t> copy(kCount);
  for (int r : peers) {
    aperture::get(copy.data(), mine, kCount, me_, r, bases);
    for (std::size_t i = 0; i < kCount; ++i) ASSERT_EQ(copy[i], pattern<std::int64_t>(r, i));
  }
  // put: my data into slot `me_` of every direct peer's inbox; store: one marker element after.
  for (int r : peers) aperture::put(slots + me_ * kCount, mine, kCount - 1, me_, r, inbox_bases);
  for (int r : peers)
    aperture::store(slots + me_ * kCount + kCount - 1, pattern<std::int64_t>(me_, kCount - 1, 3), me_, r, inbox_bases);
  world().barrier();
  for (int r : peers) {
    if (!inbox.map.is_direct(r)) continue;
    for (std::size_t i = 0; i + 1 < kCount; ++i) ASSERT_EQ(slots[r * kCount + i], pattern<std::int64_t>(r, i));
    EXPECT_EQ(slots[r * kCount + kCount - 1], pattern<std::int64_t>(r, kCount - 1, 3));
  }
  world().barrier();
  // copy between two other ranks: rank me_ moves next's data into prev's slot me_.
  const int next = peers[(std::find(peers.begin(), peers.end(), me_) - peers.begin() + 1) % peers.size()];
  const int prev = peers[(std::find(peers.begin(), peers.end(), me_) - peers.begin() + peers.size() - 1) % peers.size()];
  // Both allocations translate through their own tables; copy() needs one table, so copy within `inbox`:
  // next's slot `next` (its own data, put above) -> prev's slot `me_`.
  aperture::copy(slots + me_ * kCount, slots + next * kCount, kCount - 1, next, prev, me_, inbox_bases);
  world().barrier();
  // Who copied into my slot s? The rank whose prev is me: it moved its next's data there.
  for (std::size_t k = 0; k < peers.size(); ++k) {
    const int copier = peers[k];
    const int copier_prev = peers[(k + peers.size() - 1) % peers.size()];
    const int copier_next = peers[(k + 1) % peers.size()];
    if (copier_prev != me_) continue;
    for (std::size_t i = 0; i + 1 < kCount; ++i)
      ASSERT_EQ(slots[copier * kCount + i], pattern<std::int64_t>(copier_next, i)) << "copied by " << copier;
  }
}

TEST_P(ProviderTest, AtomicsFromEveryRankLandOnce) {
  live_.reserve(1);
  Allocation& a = allocate(16 * sizeof(std::int64_t));
  auto* cell = a.as<std::int64_t>();
  const auto* bases = a.map.peer_bases();
  const auto peers = direct_peers(a.map);
  for (int i = 0; i < 16; ++i) cell[i] = 0;
  cell[3] = 1000;        // min target
  cell[4] = -1000;       // max target
  cell[6] = 0x7;         // and target
  world().barrier();
  for (int r : peers) {
    aperture::atomic_add(cell + 0, std::int64_t{me_ + 1}, me_, r, bases);
    aperture::atomic_sub(cell + 1, std::int64_t{me_ + 1}, me_, r, bases, aperture::order::relaxed);
    aperture::atomic_or(cell + 2, std::int64_t{1} << me_, me_, r, bases);
    aperture::atomic_min(cell + 3, std::int64_t{10 * me_ - 5}, me_, r, bases);
    aperture::atomic_max(cell + 4, std::int64_t{10 * me_ + 5}, me_, r, bases, aperture::order::seq_cst);
    aperture::atomic_xor(cell + 5, std::int64_t{1} << (me_ + 8), me_, r, bases);
    aperture::atomic_and(cell + 6, ~(std::int64_t{1} << (me_ % 3)), me_, r, bases);
    // A CAS ticket: each rank increments cell 7 by CAS until it wins once.
    std::int64_t seen = aperture::load(cell + 7, me_, r, bases);
    while (true) {
      const std::int64_t found = aperture::atomic_cas(cell + 7, seen, seen + 1, me_, r, bases);
      if (found == seen) break;
      seen = found;
    }
    aperture::atomic_xchg(cell + 8, std::int64_t{me_}, me_, r, bases);
  }
  world().barrier();
  // Only ranks that can reach me contributed; with all-direct tables that is everyone.
  std::vector<std::int64_t> reach(n_);
  const std::int64_t i_reach_me_count = static_cast<std::int64_t>(peers.size());
  world().allgather(&i_reach_me_count, reach.data(), sizeof(std::int64_t));
  if (!a.map.all_direct()) GTEST_SKIP() << "sums below assume every rank reaches every rank";
  std::int64_t sum = 0, bits = 0, xbits = 0, and_mask = 0x7;
  for (int r = 0; r < n_; ++r) {
    sum += r + 1;
    bits |= std::int64_t{1} << r;
    xbits ^= std::int64_t{1} << (r + 8);
    and_mask &= ~(std::int64_t{1} << (r % 3));
  }
  EXPECT_EQ(cell[0], sum);
  EXPECT_EQ(cell[1], -sum);
  EXPECT_EQ(cell[2], bits);
  EXPECT_EQ(cell[3], -5);
  EXPECT_EQ(cell[4], 10 * (n_ - 1) + 5);
  EXPECT_EQ(cell[5], xbits);
  EXPECT_EQ(cell[6], and_mask);
  EXPECT_EQ(cell[7], n_);
  EXPECT_GE(cell[8], 0);
  EXPECT_LT(cell[8], n_);
}

TEST_P(ProviderTest, RingOfPutAndSignal) {
  constexpr std::size_t kCount = 10007;
  constexpr int kRounds = 5;
  live_.reserve(2);
  Allocation& buf = allocate(kCount * sizeof(double));
  Allocation& flags = allocate(sizeof(std::uint64_t));
  auto* flag = flags.as<std::uint64_t>();
  *flag = 0;
  if (!buf.map.all_direct()) GTEST_SKIP() << "the ring needs every neighbour to be direct";
  world().barrier();
  const int next = (me_ + 1) % n_;
  const int prev = (me_ + n_ - 1) % n_;
  std::vector<double> out(kCount);
  for (int round = 1; round <= kRounds; ++round) {
    for (std::size_t i = 0; i < kCount; ++i) out[i] = pattern<double>(me_, i, round);
    aperture::put(buf.as<double>(), out.data(), kCount, me_, next, buf.map.peer_bases());
    aperture::signal(flag, static_cast<std::uint64_t>(round), me_, next, flags.map.peer_bases());
    EXPECT_GE(aperture::wait_until_ge(flag, static_cast<std::uint64_t>(round)), static_cast<std::uint64_t>(round));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < kCount; ++i) wrong += buf.as<double>()[i] != pattern<double>(prev, i, round);
    EXPECT_EQ(wrong, 0u) << "round " << round << " from rank " << prev;
    world().barrier();  // nobody overwrites a buffer its neighbour is still checking
  }
}

TEST_P(ProviderTest, CrossAllocationTranslationOnLinearHeaps) {
  if (!provider_->is_linear()) GTEST_SKIP() << GetParam() << " gives a table per allocation (not linear)";
  live_.reserve(2);
  Allocation& a = allocate(64);
  Allocation& b = allocate(512 * sizeof(std::int32_t));
  auto* target = b.as<std::int32_t>();
  std::fill(target, target + 512, -1);
  world().barrier();
  // Translate b's pointers with a's table: slot me_ of every direct peer gets my pattern.
  for (int r : direct_peers(a.map))
    aperture::store(target + me_, pattern<std::int32_t>(me_, 0), me_, r, a.map.peer_bases());
  world().barrier();
  for (int r = 0; r < n_; ++r)
    if (a.map.is_direct(r) && b.map.is_direct(r)) EXPECT_EQ(target[r], pattern<std::int32_t>(r, 0)) << "from " << r;
  for (int r = n_; r < 512; ++r) EXPECT_EQ(target[r], -1) << "element " << r << " must be untouched";
}

TEST_P(ProviderTest, ViewsTranslateAndAreDescribed) {
  constexpr std::size_t kCount = 1024;
  live_.reserve(1);
  Allocation& a = allocate(kCount * sizeof(float));
  auto* data = a.as<float>();
  std::fill(data, data + kCount, -1.0f);
  world().barrier();
  float* view = data + 100;
  const auto view_map = provider_->symmetric_address_map(view, 200 * sizeof(float));
  EXPECT_EQ(view_map.allocation_base, reinterpret_cast<std::uintptr_t>(view));
  EXPECT_EQ(view_map.allocation_bytes, 200 * sizeof(float));
  EXPECT_EQ(view_map.host_peer_bases()[me_], reinterpret_cast<std::int64_t>(view));
  const int next = (me_ + 1) % n_;
  if (view_map.is_direct(next)) {
    // Element k of the view through the view's table == element 100 + k through the full table.
    for (std::size_t k = 0; k < 200; ++k)
      aperture::store(view + k, pattern<float>(me_, k), me_, next, view_map.peer_bases());
    EXPECT_EQ(aperture::translate(view + 5, me_, next, view_map.peer_bases()),
              aperture::translate(data + 105, me_, next, a.map.peer_bases()));
  }
  world().barrier();
  const int prev = (me_ + n_ - 1) % n_;
  if (a.map.is_direct(prev) || prev == me_) {
    for (std::size_t i = 0; i < kCount; ++i) {
      const float expected = (i >= 100 && i < 300) ? pattern<float>(prev, i - 100) : -1.0f;
      ASSERT_EQ(data[i], expected) << "element " << i;
    }
  }
  // A view running past its allocation, and memory the provider does not own, are refused.
  EXPECT_THROW(provider_->symmetric_address_map(data + kCount - 10, 11 * sizeof(float)), aperture::Error);
  float on_the_stack = 0;
  const std::string foreign = test::error_of([&] { provider_->symmetric_address_map(&on_the_stack, sizeof(float)); });
  EXPECT_NE(foreign, "(no error)");
}

TEST_P(ProviderTest, ZeroBytesAlignmentAndBadRequests) {
  live_.reserve(3);
  Allocation& empty = allocate(0);
  Allocation& other_empty = allocate(0);
  EXPECT_EQ(empty.bytes, 0u);
  EXPECT_NE(empty.ptr, other_empty.ptr) << "every allocation has an address of its own";
  Allocation& aligned = allocate(100, 4096);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(aligned.ptr) % 4096, 0u);
  // Refused on every rank alike, before anything collective happens.
  EXPECT_NE(test::error_of([&] { provider_->allocate(64, 3); }).find("power of two"), std::string::npos);
  EXPECT_NE(test::error_of([&] { provider_->allocate(std::size_t{1} << 60); }), "(no error)");
  // Double free and a foreign allocation.
  Allocation gone = provider_->allocate(64);
  Allocation stale = gone;
  provider_->free(gone);
  EXPECT_EQ(gone.ptr, nullptr) << "free resets the allocation";
  EXPECT_NE(test::error_of([&] { provider_->free(stale); }), "(no error)");
  std::vector<char> not_ours(64);
  Allocation foreign{not_ours.data(), 64, {}};
  EXPECT_NE(test::error_of([&] { provider_->free(foreign); }), "(no error)");
}

TEST_P(ProviderTest, MismatchedSizesThrowOnEveryRank) {
  if (n_ < 2) GTEST_SKIP() << "a mismatch needs two ranks";
  const std::size_t bytes = me_ == n_ - 1 ? 8192 : 4096;
  const std::string message = test::error_of([&] { live_.push_back(provider_->allocate(bytes)); });
  EXPECT_NE(message.find("mismatch"), std::string::npos) << message;
  EXPECT_NE(message.find("8192"), std::string::npos) << message;
  // Nothing was allocated, and the provider still works.
  live_.reserve(live_.size() + 1);
  Allocation& fine = allocate(4096);
  EXPECT_TRUE(fine.map.owns(fine.ptr, 4096));
}

TEST_P(ProviderTest, BadRequestOnOneRankFailsEveryRankAtOnce) {
  // The request is compared before it is judged: the ranks with a good one must not wait for
  // the refused one until APERTURE_TIMEOUT.
  if (n_ < 2) GTEST_SKIP() << "needs two ranks";
  const auto started = std::chrono::steady_clock::now();
  const std::size_t alignment = me_ == n_ - 1 ? 3 : 256;
  const std::string bad_alignment = test::error_of([&] { live_.push_back(provider_->allocate(4096, alignment)); });
  EXPECT_NE(bad_alignment.find("alignment=3"), std::string::npos) << bad_alignment;
  const std::size_t bytes = me_ == n_ - 1 ? std::size_t{1} << 60 : 4096;
  const std::string absurd = test::error_of([&] { live_.push_back(provider_->allocate(bytes)); });
  EXPECT_NE(absurd.find("mismatch"), std::string::npos) << absurd;
  // One rank frees something that is not a live allocation: every rank is refused, nothing freed.
  live_.reserve(live_.size() + 1);
  Allocation& kept = allocate(64);
  std::vector<char> not_ours(64);
  Allocation foreign{not_ours.data(), 64, {}};
  const std::string free_error = test::error_of([&] { provider_->free(me_ == n_ - 1 ? foreign : kept); });
  EXPECT_NE(free_error, "(no error)");
  EXPECT_NE(kept.ptr, nullptr) << "refused on every rank: nothing freed";
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
}

TEST_P(ProviderTest, UseAfterFreeOnTheCheckedPath) {
  // free marks the allocation's map freed, for every copy of it: a stale copy is refused by the
  // checked path and by free, even once its address is reused.
  Allocation a = provider_->allocate(256);
  const Allocation copy = a;
  const int next = (me_ + 1) % n_;
  if (copy.map.is_direct(next)) EXPECT_NO_THROW(aperture::checked_translate(copy.map, copy.as<char>(), next));
  provider_->free(a);
  EXPECT_EQ(a.ptr, nullptr) << "free resets the allocation it is given";
  EXPECT_TRUE(copy.map.freed());
  const std::string stale = test::error_of([&] { aperture::checked_translate(copy.map, copy.as<char>(), me_); });
  EXPECT_NE(stale.find("use after free"), std::string::npos) << stale;
  const std::string view = test::error_of([&] { copy.map.view_table(copy.ptr, 1); });
  EXPECT_NE(view.find("use after free"), std::string::npos) << view;
  live_.reserve(live_.size() + 1);
  allocate(256);  // may take the freed address
  Allocation stale_copy = copy;
  const std::string twice = test::error_of([&] { provider_->free(stale_copy); });
  EXPECT_NE(twice.find("already freed"), std::string::npos) << twice;
}

TEST_P(ProviderTest, ChurnKeepsContentsAcrossRanks) {
  // The same random sequence on every rank (collective calls must match); each block is filled
  // by its owner and checked through a neighbour's load before it is freed.
  std::mt19937 random(2024);
  struct Block {
    Allocation a;
    int tag;
  };
  std::vector<Block> blocks;
  const int next = (me_ + 1) % n_;
  for (int step = 0; step < 300; ++step) {
    if (blocks.empty() || random() % 100 < 55) {
      const std::size_t count = 1 + random() % 3000;
      Block b{provider_->allocate(count * sizeof(std::int32_t), std::size_t{8} << (random() % 6)), step};
      for (std::size_t i = 0; i < count; ++i) b.a.as<std::int32_t>()[i] = pattern<std::int32_t>(me_, i, b.tag);
      blocks.push_back(std::move(b));
    } else {
      const std::size_t pick = random() % blocks.size();
      Block& b = blocks[pick];
      world().barrier();  // every owner has written
      const std::size_t count = b.a.bytes / sizeof(std::int32_t);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < count; ++i) {
        wrong += b.a.as<std::int32_t>()[i] != pattern<std::int32_t>(me_, i, b.tag);
        if (b.a.map.is_direct(next))
          wrong += aperture::load(b.a.as<std::int32_t>() + i, me_, next, b.a.map.peer_bases()) !=
                   pattern<std::int32_t>(next, i, b.tag);
      }
      ASSERT_EQ(wrong, 0u) << "block of step " << b.tag << " was overwritten";
      world().barrier();  // nobody frees while a neighbour reads
      provider_->free(b.a);
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(pick));
    }
  }
  // No two live blocks overlap.
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
  for (auto& b : blocks) ranges.emplace_back(reinterpret_cast<std::uintptr_t>(b.a.ptr), b.a.bytes);
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i) EXPECT_GE(ranges[i].first, ranges[i - 1].first + ranges[i - 1].second);
  world().barrier();
  for (auto& b : blocks) provider_->free(b.a);
}

TEST_P(ProviderTest, TwoProvidersInOneLoop) {
  // The same loop reads this provider's memory and writes another provider's, each through its own table.
  // Host code touches both memories, so the second provider must hand out host memory too.
  std::unique_ptr<aperture::Provider> other;
  for (const auto& name : aperture::available_providers()) {
    if (name == GetParam() || other) continue;
    auto candidate = aperture::make_provider(name, world());
    if (candidate->memory_kind() == aperture::MemoryKind::host) other = std::move(candidate);
  }
  if (!other) GTEST_SKIP() << "only " << GetParam() << " gives host memory here; no second host provider to mix";
  constexpr std::size_t kCount = 2048;
  live_.reserve(1);
  Allocation& src = allocate(kCount * sizeof(std::int64_t));
  Allocation dst = other->allocate(kCount * sizeof(std::int64_t));
  for (std::size_t i = 0; i < kCount; ++i) src.as<std::int64_t>()[i] = pattern<std::int64_t>(me_, i);
  world().barrier();
  const int next = (me_ + 1) % n_;
  if (src.map.is_direct(next) && dst.map.is_direct(next)) {
    // dst[i] on rank next = src[i] on rank next, times 2 (read from one provider, write to the other).
    for (std::size_t i = 0; i < kCount; ++i) {
      const std::int64_t v = aperture::load(src.as<std::int64_t>() + i, me_, next, src.map.peer_bases());
      aperture::store(dst.as<std::int64_t>() + i, 2 * v, me_, next, dst.map.peer_bases());
    }
  }
  world().barrier();
  const int prev = (me_ + n_ - 1) % n_;
  if (src.map.is_direct(prev) || prev == me_)
    for (std::size_t i = 0; i < kCount; ++i) ASSERT_EQ(dst.as<std::int64_t>()[i], 2 * pattern<std::int64_t>(me_, i));
  world().barrier();
  other->free(dst);
}

TEST_P(ProviderTest, NonDirectPeersAreRefusedByTheCheckedPath) {
  live_.reserve(1);
  Allocation& a = allocate(256);
  const auto indirect = a.map.indirect_peers();
  if (indirect.empty())
    GTEST_SKIP() << GetParam() << " reaches every peer directly here; nothing to refuse (the simulated case is in "
                 << "address_map_test)";
  for (int r : indirect) {
    EXPECT_EQ(a.map.host_peer_bases()[r], 0) << "a non-direct peer's entry is 0";
    const std::string message = test::error_of([&] { aperture::checked_translate(a.map, a.as<char>(), r); });
    EXPECT_NE(message.find("not directly addressable"), std::string::npos) << message;
  }
}

INSTANTIATE_TEST_SUITE_P(HostProviders, ProviderTest, test::host_providers(), test::provider_test_name);

}  // namespace
