// tests/conformance/provider_test.cpp — what every provider owes, checked the same way for all
// seven (shm, mpi-window, openshmem on the host; cuda-ipc, cuda-vmm, nvshmem, nccl on GPUs):
// its identity and tables, every device operation against every direct peer with values distinct
// per rank and element (every element written is checked), translation across allocations
// (linear providers), views, a signal ring, two allocations and two providers in one loop,
// churn, and misuse refused with a message that names it.
//
// The same test names run on the CPU and on the GPU: Conformance/ProviderTest.<Test>/<provider>.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "../common/provider_status.h"
#include "provider_fixture.h"

namespace conformance {
namespace {

using aperture::Allocation;
using test::contains;
using test::error_of;

// store, load, put, get and copy, from every rank against every direct peer; then every element
// of every buffer is checked: a peer's slot holds its values where it reached us, 0 elsewhere.
class ProviderTest : public conformance::ProviderTest {
 protected:
  template <class T>
  void rma_with_every_peer() {
    const std::size_t count = slot_count();
    const std::size_t slot_bytes = count * sizeof(T);
    const Element e = element_of<T>();
    // One allocation holds src and the copy inbox (copy() translates both legs with one table).
    Allocation& src_and_copy = allocate(slot_bytes * (1 + static_cast<std::size_t>(n_) * n_));
    Allocation& inbox = allocate(slot_bytes * n_);
    Allocation& put_inbox = allocate(slot_bytes * n_);
    Allocation& loaded = allocate(slot_bytes * n_);
    Allocation& got = allocate(slot_bytes * n_);
    learn_direct(inbox.map);
    T* src = src_and_copy.as<T>();
    T* copy_inbox = src + count;
    for (auto* a : {&src_and_copy, &inbox, &put_inbox, &loaded, &got}) zero_unless_fresh(*a);
    memory().fill(e, src, count, me_, 2);
    sync();  // every rank's src is written and every inbox zeroed before anyone reaches out

    memory().store_to_peers(e, inbox.ptr, count, me_, n_, inbox.map.peer_bases(), 1);
    memory().load_from_peers(e, loaded.ptr, src, count, me_, n_, src_and_copy.map.peer_bases());
    memory().put_to_peers(e, put_inbox.ptr, src, count, me_, n_, put_inbox.map.peer_bases());
    memory().get_from_peers(e, got.ptr, src, count, me_, n_, src_and_copy.map.peer_bases());
    memory().copy_between_peers(e, copy_inbox, src, count, me_, n_, src_and_copy.map.peer_bases());
    sync();  // every rank's writes have landed

    EXPECT_TRUE(same_elements(memory().read(inbox.as<T>(), n_ * count), expected_from_sources<T>(count, 1)))
        << "store: inbox[source] == pattern(source)";
    EXPECT_TRUE(same_elements(memory().read(loaded.as<T>(), n_ * count), expected_from_peers<T>(count, 2)))
        << "load: loaded[peer] == peer's src";
    EXPECT_TRUE(same_elements(memory().read(put_inbox.as<T>(), n_ * count), expected_from_sources<T>(count, 2)))
        << "put: put_inbox[source] == source's src";
    EXPECT_TRUE(same_elements(memory().read(got.as<T>(), n_ * count), expected_from_peers<T>(count, 2)))
        << "get: got[peer] == peer's src";
    // Slot (c, a) of my copy inbox: written by caller c from a's src, when c reaches a and me.
    const std::size_t pairs = static_cast<std::size_t>(n_) * n_;
    EXPECT_TRUE(same_elements(
        memory().read(copy_inbox, pairs * count),
        expected_slots<T>(
            pairs, count, 2,
            [&](std::size_t s) { return reaches(int(s) / n_, int(s) % n_) && reaches(int(s) / n_, me_); },
            [&](std::size_t s) { return int(s) % n_; })))
        << "copy: copy_inbox[caller][source] == source's src";
  }
};

TEST_P(ProviderTest, IdentityAndPlacement) {
  EXPECT_EQ(provider().name(), GetParam());
  EXPECT_EQ(provider().memory_kind(), traits_->kind);
  EXPECT_EQ(provider().is_linear(), traits_->linear);
  const auto status = test::provider_status(GetParam());
  EXPECT_TRUE(status->compiled_in && status->available);
  EXPECT_TRUE(contains(status->reason, std::string(traits_->status_names))) << status->reason;
  if (on_device()) {  // this rank took GPU local_rank % count
    EXPECT_EQ(memory().current_device(), world().local_rank() % memory().device_count())
        << "rank " << me_ << " of " << memory().device_count() << " GPU(s)";
  }
}

// The table invariant of a live allocation: its map describes it, the local entry is its own
// address, the memory and the kernels' table are this rank's, and the table the kernels read
// matches the host's. Linear providers: one distance between two allocations in every mapping.
TEST_P(ProviderTest, TableInvariantAndEqualOffsets) {
  const Allocation& a = allocate(4096 * sizeof(std::int64_t));
  const Allocation& b = allocate(1000);
  for (const Allocation* x : {&a, &b}) {
    EXPECT_EQ(x->map.local_rank, me_);
    EXPECT_EQ(x->map.world_size, n_);
    EXPECT_EQ(x->map.allocation_base, reinterpret_cast<std::uintptr_t>(x->ptr));
    EXPECT_EQ(x->map.allocation_bytes, x->bytes);
    EXPECT_EQ(x->map.host_peer_bases()[me_], static_cast<std::int64_t>(x->map.allocation_base));
    EXPECT_TRUE(x->map.is_direct(me_));
    EXPECT_TRUE(x->map.owns(x->ptr, x->bytes));
    EXPECT_TRUE(memory().is_local(x->ptr)) << "the memory is this rank's (" << memory().where() << ")";
    EXPECT_TRUE(memory().is_local(x->map.peer_bases())) << "so is the kernels' table";
    EXPECT_TRUE(same_elements(memory().read(x->map.peer_bases(), n_),
                              std::vector<std::int64_t>(x->map.host_peer_bases().begin(),
                                                        x->map.host_peer_bases().end())))
        << "the table the kernels read == the host's";
    if (on_device()) {
      EXPECT_NE(x->map.peer_bases(), x->map.host_peer_bases().data());
    }
    for (int p = 0; p < n_; ++p) {
      if (p != me_ && x->map.is_direct(p)) {
        EXPECT_NE(x->map.host_peer_bases()[p], x->map.host_peer_bases()[me_]);
      }
    }
    const aperture::PeerView view = x->map.peer_view();
    EXPECT_TRUE(view.rank == me_ && view.world_size == n_ && view.peer_bases == x->map.peer_bases());
  }
  if (provider().is_linear()) {
    const std::int64_t distance = reinterpret_cast<std::int64_t>(b.ptr) - reinterpret_cast<std::int64_t>(a.ptr);
    for (int r = 0; r < n_; ++r) {
      if (a.map.is_direct(r)) {
        EXPECT_EQ(b.map.host_peer_bases()[r] - a.map.host_peer_bases()[r], distance) << "peer " << r;
      }
    }
    std::vector<std::int64_t> distances(n_);
    world().allgather(&distance, distances.data(), sizeof distance);
    for (int r = 0; r < n_; ++r) EXPECT_EQ(distances[r], distance) << "rank " << r << " got another offset";
  }
  Allocation copy = a;
  free(live_.front());
  EXPECT_TRUE(live_.front().ptr == nullptr && !live_.front().map.has_table()) << "free resets the allocation";
  EXPECT_TRUE(copy.map.freed());
}

// GPU providers: every peer on this machine is direct (P2P), and fresh memory is zeroed.
TEST_P(ProviderTest, SameMachinePeersAreDirectAndFreshMemoryIsZeroed) {
  if (!on_device()) GTEST_SKIP() << GetParam() << " promises neither (host memory; peers may be non-direct)";
  // A provider that zeroes its heap once is checked on a heap of its own, which nothing used yet.
  std::unique_ptr<aperture::Provider> own;
  if (traits_->fresh == Fresh::zeroed_once) own = make_test_provider(GetParam());
  aperture::Provider& fresh = own ? *own : provider();
  Allocation a = fresh.allocate(4096 * sizeof(std::int64_t));
  std::string peers;
  for (int p = 0; p < n_; ++p) {
    peers += a.map.is_direct(p) ? " direct" : " NOT-direct";
    if (world().same_node(p)) {
      EXPECT_TRUE(a.map.is_direct(p)) << "same-machine peer " << p << " is not direct";
    }
  }
  std::printf("rank %d: %s peers:%s\n", me_, GetParam().c_str(), peers.c_str());
  EXPECT_TRUE(same_elements(memory().read(a.as<std::int64_t>(), 4096), std::vector<std::int64_t>(4096, 0)))
      << "fresh memory is zeroed";
  sync();
  fresh.free(a);
}

TEST_P(ProviderTest, StoreLoadPutGetCopyInt32) { rma_with_every_peer<std::int32_t>(); }
TEST_P(ProviderTest, StoreLoadPutGetCopyInt64) { rma_with_every_peer<std::int64_t>(); }
TEST_P(ProviderTest, StoreLoadPutGetCopyFloat) { rma_with_every_peer<float>(); }
TEST_P(ProviderTest, StoreLoadPutGetCopyDouble) { rma_with_every_peer<double>(); }

// Every atomic from every rank into every direct peer lands exactly once; atomic_cas and
// atomic_xchg return the old value.
TEST_P(ProviderTest, AtomicsFromEveryRankLandOnce) {
  const std::size_t words = kWords + 2 * static_cast<std::size_t>(n_);
  Allocation& buffer = allocate(words * sizeof(std::int64_t));
  learn_direct(buffer.map);
  std::vector<std::int64_t> initial(words, 0);
  initial[kAnd] = -1;
  initial[kSub] = kSubStart;
  memory().write(buffer.as<std::int64_t>(), initial);
  auto* seen = static_cast<std::int64_t*>(memory().scratch(2 * n_ * sizeof(std::int64_t)));
  memory().write(seen, std::vector<std::int64_t>(2 * n_, -1));
  sync();
  memory().atomics_to_peers(buffer.as<std::int64_t>(), me_, n_, buffer.map.peer_bases(), seen, seen + n_);
  sync();

  const auto got = memory().read(buffer.as<std::int64_t>(), words);
  const std::int64_t workers = memory().workers();
  std::int64_t add = 0, sub = kSubStart, bits_or = 0, bits_and = -1, bits_xor = 0, lo = 0, hi = 0, tickets = 0;
  for (int s = 0; s < n_; ++s) {
    if (!reaches(s, me_)) continue;
    add += (s + 1) * workers;
    sub -= workers;
    bits_or |= std::int64_t{1} << s;
    bits_and &= ~(std::int64_t{1} << s);
    bits_xor ^= std::int64_t{1} << (s + 20);
    lo = std::min<std::int64_t>(lo, -100 - s);
    hi = std::max<std::int64_t>(hi, 100 + 10 * s + std::min<std::int64_t>(6, workers - 1));
    ++tickets;
  }
  EXPECT_EQ(got[kAdd], add) << "atomic_add";
  EXPECT_EQ(got[kSub], sub) << "atomic_sub";
  EXPECT_EQ(got[kOr], bits_or) << "atomic_or";
  EXPECT_EQ(got[kAnd], bits_and) << "atomic_and";
  EXPECT_EQ(got[kXor], bits_xor) << "atomic_xor";
  EXPECT_EQ(got[kMin], lo) << "atomic_min";
  EXPECT_EQ(got[kMax], hi) << "atomic_max";
  EXPECT_EQ(got[kTicket], tickets) << "atomic_cas tickets";
  for (int s = 0; s < n_; ++s) {
    EXPECT_EQ(got[kWords + s], reaches(s, me_) ? s + 1 : 0) << "atomic_cas slot " << s;
    EXPECT_EQ(got[kWords + n_ + s], reaches(s, me_) ? 7 * (s + 1) : 0) << "atomic_xchg slot " << s;
  }
  const auto returned = memory().read(seen, 2 * static_cast<std::size_t>(n_));
  for (int p = 0; p < n_; ++p) {
    EXPECT_EQ(returned[p], reaches(me_, p) ? 0 : -1) << "atomic_cas returned the old value at rank " << p;
    EXPECT_EQ(returned[n_ + p], reaches(me_, p) ? 0 : -1) << "atomic_xchg returned the old value at rank " << p;
  }
  sync();
  memory().release(seen);
}

// signal / wait_until_ge around a ring, several rounds on the same flag: the release/acquire
// pair carries the data stored before it.
TEST_P(ProviderTest, RingOfStoreAndSignal) {
  constexpr std::uint64_t kRounds = 5;
  const std::size_t count = slot_count();
  Allocation& a = allocate(count * sizeof(std::int64_t) + sizeof(std::uint64_t));
  learn_direct(a.map);
  for (int r = 0; r < n_; ++r)
    if (!reaches(r, (r + 1) % n_)) GTEST_SKIP() << "the ring needs every rank to reach the next directly";
  zero_unless_fresh(a);
  auto* data = a.as<std::int64_t>();
  auto* flag = reinterpret_cast<std::uint64_t*>(data + count);
  for (std::uint64_t round = 1; round <= kRounds; ++round) {
    sync();  // everyone checked the last round before its data is overwritten
    const RingOutcome o = memory().signal_ring(a.map.peer_view(), data, count, flag, round);
    EXPECT_EQ(o.timeouts, 0u) << "round " << round << ": the wait timed out";
    EXPECT_EQ(o.wrong, 0u) << "round " << round << ": elements wrong right after the wait";
  }
  sync();
  EXPECT_EQ(memory().read(flag, 1)[0], kRounds);
}

// Linear providers: the distance between two allocations is the same in every peer's mapping
// and on every rank, so a store handed another allocation's table writes into the right memory.
TEST_P(ProviderTest, CrossAllocationTranslationOnLinearHeaps) {
  if (!provider().is_linear()) GTEST_SKIP() << GetParam() << " gives a table per allocation (not linear)";
  const std::size_t count = slot_count();
  Allocation& first = allocate(64);
  allocate(12345);  // something in between
  Allocation& target = allocate(n_ * count * sizeof(std::int64_t), 4096);
  learn_direct(target.map);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(target.ptr) % 4096, 0u);
  const auto a = first.map.host_peer_bases();
  const auto b = target.map.host_peer_bases();
  const std::int64_t distance = reinterpret_cast<std::int64_t>(target.ptr) - reinterpret_cast<std::int64_t>(first.ptr);
  for (int p = 0; p < n_; ++p) {
    if (!first.map.is_direct(p)) continue;
    EXPECT_EQ(b[p] - a[p], distance) << "peer " << p;
    EXPECT_EQ(aperture::translate(target.as<std::int64_t>(), me_, p, a.data()),
              aperture::translate(target.as<std::int64_t>(), me_, p, b.data()));
  }
  std::vector<std::int64_t> distances(n_);
  world().allgather(&distance, distances.data(), sizeof distance);
  for (int r = 0; r < n_; ++r) EXPECT_EQ(distances[r], distance) << "rank " << r << " got another offset";
  zero_unless_fresh(target);
  sync();
  memory().store_to_peers(Element::int64, target.ptr, count, me_, n_, first.map.peer_bases(), 6);
  sync();
  EXPECT_TRUE(same_elements(memory().read(target.as<std::int64_t>(), n_ * count),
                            expected_from_sources<std::int64_t>(count, 6)))
      << "stored with another allocation's table";
}

// A view (symmetric_address_map of a sub-range): the same ranks, its own base and length, every
// direct entry shifted by the offset, a kernels' table of its own that matches the host's; a
// store through it writes where the whole allocation's table says, and nowhere else.
TEST_P(ProviderTest, ViewsTranslateAndAreDescribed) {
  constexpr std::size_t kOffset = 1017;  // elements: an odd offset, 8-byte aligned only
  const std::size_t count = slot_count();
  const std::size_t total = kOffset + n_ * count + 100;
  Allocation& whole = allocate(total * sizeof(std::int64_t));
  learn_direct(whole.map);
  zero_unless_fresh(whole);
  std::int64_t* view = whole.as<std::int64_t>() + kOffset;
  const std::size_t view_bytes = n_ * count * sizeof(std::int64_t);
  const aperture::SymmetricAddressMap vmap = provider().symmetric_address_map(view, view_bytes);
  EXPECT_EQ(vmap.local_rank, me_);
  EXPECT_EQ(vmap.world_size, n_);
  EXPECT_EQ(vmap.allocation_base, reinterpret_cast<std::uintptr_t>(view));
  EXPECT_EQ(vmap.allocation_bytes, view_bytes);
  EXPECT_TRUE(vmap.owns(view, view_bytes));
  EXPECT_FALSE(vmap.owns(view - 1));
  const auto whole_host = whole.map.host_peer_bases();
  const auto view_host = vmap.host_peer_bases();
  for (int p = 0; p < n_; ++p) {
    EXPECT_EQ(vmap.is_direct(p), whole.map.is_direct(p));
    EXPECT_EQ(view_host[p], whole.map.is_direct(p) ? whole_host[p] + std::int64_t{kOffset * sizeof(std::int64_t)} : 0)
        << "peer " << p;
  }
  EXPECT_NE(vmap.peer_bases(), whole.map.peer_bases());
  EXPECT_TRUE(memory().is_local(vmap.peer_bases()));
  EXPECT_TRUE(same_elements(memory().read(vmap.peer_bases(), n_), std::vector<std::int64_t>(view_host.begin(),
                                                                                            view_host.end())));
  sync();  // every rank's memory is zeroed before anyone stores
  EXPECT_EQ(memory().store_through_view(view, count, me_, n_, vmap.peer_bases(), whole.map.peer_bases()), 0u)
      << "the view's and the whole allocation's tables agree";
  sync();
  std::vector<std::int64_t> expected(total, 0);
  const auto slots = expected_from_sources<std::int64_t>(count, 5);
  std::copy(slots.begin(), slots.end(), expected.begin() + static_cast<std::ptrdiff_t>(kOffset));
  EXPECT_TRUE(same_elements(memory().read(whole.as<std::int64_t>(), total), expected))
      << "whole[view offset + source slot] == pattern(source), 0 elsewhere";
  // A map of the whole allocation, asked for afterwards, has the allocation's table.
  const auto again = provider().symmetric_address_map(whole.ptr, whole.bytes);
  for (int p = 0; p < n_; ++p) EXPECT_EQ(again.host_peer_bases()[p], whole_host[p]) << "peer " << p;
  // A range running past the allocation is refused.
  const auto past_end = error_of([&] { provider().symmetric_address_map(view, total * sizeof(std::int64_t)); });
  EXPECT_NE(past_end, "(no error)") << "a range running past the allocation is refused";
}

// The same loop loads from one allocation and stores into another, each through its own table.
TEST_P(ProviderTest, TwoAllocationsInOneLoop) {
  const std::size_t count = slot_count();
  Allocation& in = allocate(count * sizeof(std::int64_t));
  Allocation& out = allocate(n_ * count * sizeof(std::int64_t));
  learn_direct(out.map);
  zero_unless_fresh(out);
  memory().fill(Element::int64, in.ptr, count, me_, 3);
  sync();
  memory().relay(in.as<std::int64_t>(), in.map.peer_bases(), out.as<std::int64_t>(), out.map.peer_bases(), count,
                 me_, n_, me_ + 1);
  sync();
  std::vector<std::int64_t> expected(n_ * count, 0);
  for (int s = 0; s < n_; ++s)
    if (reaches(s, me_) && in.map.is_direct(s))
      for (std::size_t i = 0; i < count; ++i) expected[s * count + i] = pattern<std::int64_t>(me_, i, 3) + s + 1;
  EXPECT_TRUE(same_elements(memory().read(out.as<std::int64_t>(), n_ * count), expected))
      << "out[source] == my in + source + 1";
}

// The same loop reads this provider's memory and writes another provider's of the same kind,
// each through its own table (aperture's kernels never learn who allocated what).
TEST_P(ProviderTest, TwoProvidersInOneLoop) {
  // Another provider of the same memory kind, of the same family where there is one: aperture's
  // heaps mix with each other, NVSHMEM with NCCL (no aperture heap beside foreign memory).
  std::string other_name;
  for (const bool same_family : {true, false})
    for (const auto& name : aperture::available_providers()) {
      const ProviderTraits& other = traits_of(name);
      if (other_name.empty() && name != GetParam() && other.kind == traits_->kind &&
          (!same_family || other.fresh == traits_->fresh) &&
          (other.fresh != Fresh::zeroed_each || world().local_size() <= memory().device_count()))
        other_name = name;
    }
  if (other_name.empty())
    GTEST_SKIP() << "only " << GetParam() << " gives " << memory().where() << " memory here; nothing to mix";
  aperture::Provider& other = shared_provider(other_name);
  const std::size_t count = slot_count();
  Allocation& src = allocate(count * sizeof(std::int64_t));
  Allocation dst = other.allocate(n_ * count * sizeof(std::int64_t));
  if (traits_of(other_name).fresh != Fresh::zeroed_each) memory().zero(dst.ptr, dst.bytes);
  memory().fill(Element::int64, src.ptr, count, me_, 4);
  std::vector<std::uint8_t> mine(n_);
  for (int p = 0; p < n_; ++p) mine[p] = src.map.is_direct(p) && dst.map.is_direct(p);
  std::vector<std::uint8_t> both(static_cast<std::size_t>(n_) * n_);
  world().allgather(mine.data(), both.data(), n_);
  sync();
  memory().relay(src.as<std::int64_t>(), src.map.peer_bases(), dst.as<std::int64_t>(), dst.map.peer_bases(), count,
                 me_, n_, 2 * (me_ + 1));
  sync();
  std::vector<std::int64_t> expected(n_ * count, 0);
  for (int s = 0; s < n_; ++s)
    if (both[static_cast<std::size_t>(s) * n_ + me_])
      for (std::size_t i = 0; i < count; ++i) expected[s * count + i] = pattern<std::int64_t>(me_, i, 4) + 2 * (s + 1);
  EXPECT_TRUE(same_elements(memory().read(dst.as<std::int64_t>(), n_ * count), expected))
      << other_name << " memory written with values loaded from " << GetParam() << " memory";
  EXPECT_NE(src.map.peer_bases(), dst.map.peer_bases()) << "each table translates its own memory";
  sync();
  other.free(dst);
}

TEST_P(ProviderTest, ZeroBytesAlignmentAndBadRequests) {
  Allocation& empty = allocate(0);
  Allocation& other_empty = allocate(0);
  EXPECT_EQ(empty.bytes, 0u);
  EXPECT_TRUE(empty.ptr != nullptr && other_empty.ptr != nullptr);
  EXPECT_NE(empty.ptr, other_empty.ptr) << "every allocation has an address of its own";
  for (std::size_t align : {std::size_t{4096}, std::size_t{1} << 20, std::size_t{2} << 20}) {
    Allocation& aligned = allocate(100, align);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(aligned.ptr) % align, 0u) << "alignment " << align;
    if (traits_->fresh != Fresh::zeroed_once) continue;  // aperture's device heaps: every peer's copy is aligned too
    for (int p = 0; p < n_; ++p) {
      if (aligned.map.is_direct(p)) {
        EXPECT_EQ(static_cast<std::uint64_t>(aligned.map.host_peer_bases()[p]) % align, 0u) << "peer " << p;
      }
    }
  }
  // Refused on every rank alike, before anything collective happens.
  const auto odd = error_of([&] { provider().allocate(64, 3); });
  EXPECT_TRUE(contains(odd, "not a power of two")) << odd;
  EXPECT_NE(error_of([&] { provider().allocate(std::size_t{1} << 60); }), "(no error)");
}

// Memory the provider did not allocate (this rank's scratch memory of the same kind) is refused
// by free and by symmetric_address_map.
TEST_P(ProviderTest, ForeignMemoryIsRefused) {
  void* foreign = memory().scratch(256);
  Allocation stranger{foreign, 256, {}};
  const auto not_ours = error_of([&] { provider().free(stranger); });
  EXPECT_TRUE(contains(not_ours, "another provider")) << not_ours;
  const auto not_ours_map = error_of([&] { provider().symmetric_address_map(foreign, 16); });
  EXPECT_NE(not_ours_map, "(no error)");
  if (on_device()) {
    EXPECT_TRUE(contains(not_ours_map, "another provider")) << not_ours_map;
  }
  memory().release(foreign);
}

TEST_P(ProviderTest, MismatchedSizesThrowOnEveryRank) {
  if (n_ < 2) GTEST_SKIP() << "a mismatch needs two ranks";
  const std::size_t bytes = me_ == n_ - 1 ? 8192 : 4096;
  const std::string message = error_of([&] { live_.push_back(provider().allocate(bytes)); });
  EXPECT_TRUE(contains(message, "mismatch")) << message;
  EXPECT_TRUE(contains(message, "8192")) << message;
  // Nothing was allocated, and the provider still works.
  Allocation& fine = allocate(4096);
  EXPECT_TRUE(fine.map.owns(fine.ptr, 4096));
}

TEST_P(ProviderTest, BadRequestOnOneRankFailsEveryRankAtOnce) {
  // The request is compared before it is judged: the ranks with a good one must not wait for
  // the refused one until APERTURE_TIMEOUT.
  if (n_ < 2) GTEST_SKIP() << "needs two ranks";
  const auto started = std::chrono::steady_clock::now();
  const std::size_t alignment = me_ == n_ - 1 ? 3 : 256;
  const std::string bad_alignment = error_of([&] { live_.push_back(provider().allocate(4096, alignment)); });
  EXPECT_TRUE(contains(bad_alignment, "mismatch") && contains(bad_alignment, "alignment=3")) << bad_alignment;
  const std::size_t bytes = me_ == n_ - 1 ? std::size_t{1} << 60 : 4096;
  const std::string absurd = error_of([&] { live_.push_back(provider().allocate(bytes)); });
  EXPECT_TRUE(contains(absurd, "mismatch")) << absurd;
  // One rank frees something that is not a live allocation: every rank is refused, nothing freed.
  Allocation& kept = allocate(64);
  void* foreign = memory().scratch(64);
  Allocation stranger{foreign, 64, {}};
  const std::string free_error = error_of([&] { provider().free(me_ == n_ - 1 ? stranger : kept); });
  EXPECT_NE(free_error, "(no error)");
  EXPECT_NE(kept.ptr, nullptr) << "refused on every rank: nothing freed";
  memory().release(foreign);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
}

TEST_P(ProviderTest, UseAfterFreeOnTheCheckedPath) {
  // free marks the allocation's map freed, for every copy of it: a stale copy is refused by the
  // checked path and by free, at once and once its address is reused.
  Allocation a = provider().allocate(256);
  const Allocation copy = a;
  const int next = (me_ + 1) % n_;
  if (copy.map.is_direct(next)) {
    EXPECT_NO_THROW(aperture::checked_translate(copy.map, copy.as<char>(), next));
  }
  provider().free(a);
  EXPECT_EQ(a.ptr, nullptr) << "free resets the allocation it is given";
  EXPECT_TRUE(copy.map.freed());
  const std::string stale = error_of([&] { aperture::checked_translate(copy.map, copy.as<char>(), me_); });
  EXPECT_TRUE(contains(stale, "use after free")) << stale;
  const std::string view = error_of([&] { copy.map.view_table(copy.ptr, 1); });
  EXPECT_TRUE(contains(view, "use after free")) << view;
  Allocation twice_copy = copy;
  const std::string twice = error_of([&] { provider().free(twice_copy); });
  EXPECT_TRUE(contains(twice, "freed twice")) << twice;
  allocate(256);  // may take the freed address
  Allocation stale_copy = copy;
  const std::string after_reuse = error_of([&] { provider().free(stale_copy); });
  EXPECT_TRUE(contains(after_reuse, "already freed")) << after_reuse;
}

TEST_P(ProviderTest, ChurnKeepsContentsAcrossRanks) {
  // The same random sequence on every rank (collective calls must match); each block is filled
  // by its owner and checked, locally and through a neighbour's load, before it is freed.
  std::mt19937 random(2024);
  struct Block {
    Allocation a;
    int tag;
  };
  std::vector<Block> blocks;
  const int next = (me_ + 1) % n_;
  const int steps = on_device() ? 120 : 300;  // each device step is a few kernel launches
  for (int step = 0; step < steps; ++step) {
    if (blocks.empty() || random() % 100 < 55) {
      const std::size_t count = 1 + random() % 3000;
      const std::size_t alignment = std::size_t{8} << (random() % 6);
      Block b{provider().allocate(count * sizeof(std::int32_t), alignment), step};
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.a.ptr) % alignment, 0u);
      memory().fill(Element::int32, b.a.ptr, count, me_, b.tag);
      blocks.push_back(std::move(b));
    } else {
      const std::size_t pick = random() % blocks.size();
      Block& b = blocks[pick];
      sync();  // every owner has written
      const std::size_t count = b.a.bytes / sizeof(std::int32_t);
      EXPECT_TRUE(same_elements(memory().read(b.a.as<std::int32_t>(), count),
                                expected_slots<std::int32_t>(
                                    1, count, b.tag, [](std::size_t) { return true; }, [&](std::size_t) { return me_; })))
          << "block of step " << b.tag << " was overwritten";
      if (b.a.map.is_direct(next)) {
        auto* loaded = static_cast<std::int32_t*>(memory().scratch(n_ * count * sizeof(std::int32_t)));
        memory().load_from_peers(Element::int32, loaded, b.a.ptr, count, me_, n_, b.a.map.peer_bases());
        EXPECT_TRUE(same_elements(memory().read(loaded + next * count, count),
                                  expected_slots<std::int32_t>(
                                      1, count, b.tag, [](std::size_t) { return true; },
                                      [&](std::size_t) { return next; })))
            << "block of step " << b.tag << ", loaded from rank " << next;
        memory().release(loaded);
      }
      sync();  // nobody frees while a neighbour reads
      provider().free(b.a);
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(pick));
    }
  }
  // No two live blocks overlap.
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
  for (auto& b : blocks) ranges.emplace_back(reinterpret_cast<std::uintptr_t>(b.a.ptr), b.a.bytes);
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i) EXPECT_GE(ranges[i].first, ranges[i - 1].first + ranges[i - 1].second);
  sync();
  for (auto& b : blocks) provider().free(b.a);
}

TEST_P(ProviderTest, NonDirectPeersAreRefusedByTheCheckedPath) {
  Allocation& a = allocate(256);
  const auto indirect = a.map.indirect_peers();
  if (indirect.empty())
    GTEST_SKIP() << GetParam() << " reaches every peer directly here; nothing to refuse (the simulated case is in "
                 << "address_map_test)";
  for (int r : indirect) {
    EXPECT_EQ(a.map.host_peer_bases()[r], 0) << "a non-direct peer's entry is 0";
    const std::string message = error_of([&] { aperture::checked_translate(a.map, a.as<char>(), r); });
    EXPECT_TRUE(contains(message, "not directly addressable")) << message;
  }
}

INSTANTIATE_TEST_SUITE_P(Conformance, ProviderTest, every_provider(), provider_test_name);

}  // namespace
}  // namespace conformance
