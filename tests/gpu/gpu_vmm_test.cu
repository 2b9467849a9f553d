// tests/gpu/gpu_vmm_test.cu — the cuda-vmm provider: its table (one reserved range, linear),
// store/load/put/get, atomics and signals between the GPUs, translation across allocations,
// views, and above all growth: allocations beyond the initial heap make every rank map more
// memory, and everything handed out before (pointers, maps, device tables) keeps working.
//
// The heap is set small here (APERTURE_GPU_HEAP_SIZE=32M within APERTURE_VMM_RESERVE=1G per
// rank), whatever the caller's environment says, so that the grow path runs.
//
//     aperture launch -n 2 -- gpu_vmm_test
#include <cstdlib>
#include <string>

#include "../common/env_override.h"
#include "../common/error_of.h"
#include "gpu_test.h"
#include "misuse_checks.h"
#include "peer_kernels.cuh"
#include "provider_checks.h"

namespace {

using gputest::device_of;
using gputest::expected_from_peers;
using gputest::expected_from_sources;
using gputest::kChunk;
using gputest::pattern;
using gputest::thread_count;
using gputest::thread_index;
using test::contains;
using test::EnvOverride;
using test::error_of;

constexpr const char* kProgram = "gpu_vmm_test";
constexpr std::size_t kInitialHeap = std::size_t{32} << 20;
constexpr std::size_t kReserve = std::size_t{1} << 30;
constexpr std::size_t kCount = std::size_t{1} << 14;  // elements per slot
constexpr int kBlocks = 64;
constexpr int kThreads = 256;
constexpr gputest::RmaShape kShape{kCount, kBlocks, kThreads};
constexpr std::uint64_t kTimeoutNs = 20'000'000'000ull;

// --- the table ------------------------------------------------------------------------------

void identity_and_table(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  gputest::check_identity(job, "cuda-vmm", /*linear=*/true);
  aperture::Allocation a = provider.allocate(4096 * sizeof(std::int64_t));
  aperture::Allocation b = provider.allocate(1000);
  job.learn_direct(a.map);
  for (const aperture::Allocation* x : {&a, &b}) gputest::check_table(job, *x);
  gputest::check_peers_and_zeroed(job, a);
  // One reserved range: every peer's heap sits a whole number of slots (APERTURE_VMM_RESERVE)
  // from ours, in rank order on one machine; and the heap is linear.
  const auto ta = a.map.host_peer_bases();
  const auto tb = b.map.host_peer_bases();
  const std::int64_t distance = reinterpret_cast<std::int64_t>(b.ptr) - reinterpret_cast<std::int64_t>(a.ptr);
  for (int p = 0; p < n; ++p) {
    if (!a.map.is_direct(p)) continue;
    const std::int64_t apart = ta[p] - ta[me];
    CHECK_MSG(apart % static_cast<std::int64_t>(kReserve) == 0, "peer " + std::to_string(p) + " is " +
                                                                     std::to_string(apart) + " bytes away");
    CHECK(apart / static_cast<std::int64_t>(kReserve) == p - me);  // one machine: slot == rank
    CHECK(tb[p] - ta[p] == distance);
  }
  job.sync();
  provider.free(b);
  provider.free(a);
  CHECK(a.ptr == nullptr && !a.map.has_table());
}

// --- store, load, put, get ------------------------------------------------------------------

__global__ void rma(std::int64_t* src, std::int64_t* stored, std::int64_t* put, std::int64_t* loaded,
                    std::int64_t* got, int me, int n, const std::int64_t* table) {
  for (int p = 0; p < n; ++p) {
    if (table[p] == 0) continue;
    for (std::size_t i = thread_index(); i < kCount; i += thread_count()) {
      aperture::store(&stored[me * kCount + i], pattern<std::int64_t>(me, i, 1), me, p, table);
      loaded[p * kCount + i] = aperture::load(&src[i], me, p, table);
    }
    for (std::size_t c = thread_index(); c < kCount / kChunk; c += thread_count()) {
      aperture::put(&put[me * kCount + c * kChunk], &src[c * kChunk], kChunk, me, p, table);
      aperture::get(&got[p * kCount + c * kChunk], &src[c * kChunk], kChunk, me, p, table);
    }
  }
}

void store_load_put_get(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  // One allocation: src, then stored, put, loaded and got (n slots each); one table for all.
  aperture::Allocation all = provider.allocate((1 + 4 * static_cast<std::size_t>(n)) * kCount * sizeof(std::int64_t));
  auto* src = all.as<std::int64_t>();
  auto* stored = src + kCount;
  auto* put = stored + n * kCount;
  auto* loaded = put + n * kCount;
  auto* got = loaded + n * kCount;
  APERTURE_CUDA_CHECK(cudaMemset(all.ptr, 0, all.bytes), "test");  // the heap is reused: not fresh here
  gputest::fill<<<kBlocks, kThreads>>>(src, kCount, me, 2);
  gputest::launched("fill");
  job.sync();
  rma<<<kBlocks, kThreads>>>(src, stored, put, loaded, got, me, n, all.map.peer_bases());
  gputest::launched("rma");
  job.sync();
  const auto host = gputest::to_host(src, (1 + 4 * static_cast<std::size_t>(n)) * kCount);
  const auto from_sources = expected_from_sources<std::int64_t>(job, kCount, 1);
  const auto puts = expected_from_sources<std::int64_t>(job, kCount, 2);
  const auto from_peers = expected_from_peers<std::int64_t>(job, kCount, 2);
  CHECK_RANGE(host.data() + (stored - src), from_sources, "store: stored[source] == pattern(source)");
  CHECK_RANGE(host.data() + (put - src), puts, "put: put[source] == source's src");
  CHECK_RANGE(host.data() + (loaded - src), from_peers, "load: loaded[peer] == peer's src");
  CHECK_RANGE(host.data() + (got - src), from_peers, "get: got[peer] == peer's src");
  job.sync();
  provider.free(all);
}

// --- atomics --------------------------------------------------------------------------------

// cells: [0] add from every thread, [1] max, [2 + s] cas 0 -> s + 1 by source s; found[p]: what
// this rank's CAS found at peer p (this rank's own memory).
__global__ void atomics(std::int64_t* cells, std::int64_t* found, int me, int n, const std::int64_t* table) {
  for (int p = 0; p < n; ++p) {
    if (table[p] == 0) continue;
    aperture::atomic_add(&cells[0], std::int64_t{me + 1}, me, p, table);
    aperture::atomic_max(&cells[1], static_cast<std::int64_t>((me + 1) * 1000 + static_cast<int>(thread_index() % 7)),
                         me, p, table);
    if (thread_index() == 0) found[p] = aperture::atomic_cas(&cells[2 + me], std::int64_t{0}, std::int64_t{me + 1}, me, p, table);
  }
}

void atomics_between_gpus(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  aperture::Allocation cells = provider.allocate((2 + static_cast<std::size_t>(n)) * sizeof(std::int64_t));
  aperture::Allocation found = provider.allocate(n * sizeof(std::int64_t));
  APERTURE_CUDA_CHECK(cudaMemset(cells.ptr, 0, cells.bytes), "test");
  APERTURE_CUDA_CHECK(cudaMemset(found.ptr, 0xff, found.bytes), "test");
  job.sync();
  atomics<<<kBlocks, kThreads>>>(cells.as<std::int64_t>(), found.as<std::int64_t>(), me, n, cells.map.peer_bases());
  gputest::launched("atomics");
  job.sync();
  const auto host = gputest::to_host(cells.as<std::int64_t>(), 2 + static_cast<std::size_t>(n));
  const auto olds = gputest::to_host(found.as<std::int64_t>(), n);
  std::int64_t added = 0, largest = 0;
  for (int s = 0; s < n; ++s) {
    if (!job.reaches(s, me)) continue;
    added += static_cast<std::int64_t>(s + 1) * kBlocks * kThreads;
    largest = std::max<std::int64_t>(largest, (s + 1) * 1000 + 6);
  }
  CHECK_MSG(host[0] == added, "atomic_add: got " + std::to_string(host[0]) + ", expected " + std::to_string(added));
  CHECK_MSG(host[1] == largest, "atomic_max: got " + std::to_string(host[1]) + ", expected " + std::to_string(largest));
  for (int s = 0; s < n; ++s) CHECK(host[2 + s] == (job.reaches(s, me) ? s + 1 : 0));
  for (int p = 0; p < n; ++p) CHECK(olds[p] == (job.reaches(me, p) ? 0 : -1));
  job.sync();
  provider.free(found);
  provider.free(cells);
}

// --- signals --------------------------------------------------------------------------------

// A ring of kRounds: in round k every rank puts pattern(me, i, k) into the next rank's slot k
// and signals it k + 1; it waits for its own flag to reach k + 1 and checks slot k came from the
// previous rank. One block, so the one thread that signals follows every store (__syncthreads).
constexpr int kRounds = 8;
constexpr std::size_t kRingCount = 4096;

__global__ void ring(std::int64_t* slots, std::uint64_t* flag, int me, int n, const std::int64_t* table,
                     unsigned long long* wrong, unsigned long long* timeouts) {
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  for (int k = 0; k < kRounds; ++k) {
    for (std::size_t i = threadIdx.x; i < kRingCount; i += blockDim.x)
      aperture::store(&slots[k * kRingCount + i], pattern<std::int64_t>(me, i, k), me, next, table);
    __syncthreads();
    if (threadIdx.x == 0) aperture::signal(flag, static_cast<std::uint64_t>(k + 1), me, next, table);
    __shared__ int ok;
    if (threadIdx.x == 0) {
      std::uint64_t seen = 0;
      ok = aperture::wait_until_ge_for(flag, static_cast<std::uint64_t>(k + 1), kTimeoutNs, &seen) ? 1 : 0;
      if (!ok) atomicAdd(timeouts, 1ull);
    }
    __syncthreads();
    if (!ok) return;
    for (std::size_t i = threadIdx.x; i < kRingCount; i += blockDim.x)
      if (slots[k * kRingCount + i] != pattern<std::int64_t>(prev, i, k)) atomicAdd(wrong, 1ull);
  }
}

void signals(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  aperture::Allocation data = provider.allocate(kRounds * kRingCount * sizeof(std::int64_t));
  aperture::Allocation flag = provider.allocate(sizeof(std::uint64_t));
  aperture::Allocation counters = provider.allocate(2 * sizeof(unsigned long long));
  for (auto* a : {&data, &flag, &counters}) APERTURE_CUDA_CHECK(cudaMemset(a->ptr, 0, a->bytes), "test");
  // The ring needs every rank to reach the next one; say so instead of hanging.
  bool ring_direct = true;
  for (int r = 0; r < n; ++r) ring_direct = ring_direct && job.reaches(r, (r + 1) % n);
  if (!CHECK_MSG(ring_direct, "ring needs every rank to reach the next")) return;
  job.sync();
  auto* c = counters.as<unsigned long long>();
  ring<<<1, kThreads>>>(data.as<std::int64_t>(), flag.as<std::uint64_t>(), me, n, data.map.peer_bases(), c, c + 1);
  gputest::launched("ring");
  job.sync();
  const auto outcome = gputest::to_host(c, 2);
  CHECK_MSG(outcome[0] == 0 && outcome[1] == 0,
            "ring: " + std::to_string(outcome[0]) + " wrong elements, " + std::to_string(outcome[1]) + " timeouts");
  CHECK(gputest::to_host(flag.as<std::uint64_t>(), 1)[0] == kRounds);
  job.sync();
  provider.free(counters);
  provider.free(flag);
  provider.free(data);
}

// --- growth ---------------------------------------------------------------------------------

// The first and last `count` elements of every peer's [base, base + total): pattern(me, i, salt)
// at slot me of each end region (ends: 2 regions of n * count elements).
__global__ void store_ends(std::int64_t* base, std::size_t total, std::size_t count, int me, int n,
                           const std::int64_t* table, int salt) {
  for (int p = 0; p < n; ++p) {
    if (table[p] == 0) continue;
    for (std::size_t i = thread_index(); i < count; i += thread_count()) {
      aperture::store(&base[me * count + i], pattern<std::int64_t>(me, i, salt), me, p, table);
      aperture::store(&base[total - n * count + me * count + i], pattern<std::int64_t>(me, i, salt + 1), me, p, table);
    }
  }
}

void check_ends(gputest::Job& job, const aperture::Allocation& a, std::size_t count, int salt, const char* what) {
  const std::size_t total = a.bytes / sizeof(std::int64_t);
  const auto head = gputest::to_host(a.as<std::int64_t>(), job.n * count);
  const auto tail = gputest::to_host(a.as<std::int64_t>() + total - job.n * count, job.n * count);
  CHECK_RANGE(head.data(), expected_from_sources<std::int64_t>(job, count, salt),
              (std::string(what) + ": first elements").c_str());
  CHECK_RANGE(tail.data(), expected_from_sources<std::int64_t>(job, count, salt + 1),
              (std::string(what) + ": last elements").c_str());
}

void growth(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  constexpr std::size_t kEnds = 1024;

  // Before: an allocation inside the initial heap, written by every peer.
  aperture::Allocation old = provider.allocate(std::size_t{8} << 20);
  APERTURE_CUDA_CHECK(cudaMemset(old.ptr, 0, old.bytes), "test");
  const std::size_t old_total = old.bytes / sizeof(std::int64_t);
  const aperture::SymmetricAddressMap old_map = old.map;  // kept across the grows
  const std::vector<std::int64_t> old_table(old_map.host_peer_bases().begin(), old_map.host_peer_bases().end());
  const std::int64_t* old_device_table = old_map.peer_bases();
  job.sync();
  store_ends<<<kBlocks, kThreads>>>(old.as<std::int64_t>(), old_total, kEnds, me, n, old_map.peer_bases(), 10);
  gputest::launched("store_ends (old)");
  job.sync();
  check_ends(job, old, kEnds, 10, "before growing: old allocation");

  // Larger than the whole initial heap: it cannot fit without growing.
  aperture::Allocation big = provider.allocate(kInitialHeap + (std::size_t{8} << 20));
  const std::size_t big_total = big.bytes / sizeof(std::int64_t);
  CHECK(device_of(big.ptr) == device_of(old.ptr));
  CHECK(device_of(static_cast<char*>(big.ptr) + big.bytes - 1) == device_of(old.ptr));
  {
    // Grown memory is zeroed, like the initial heap. Its last 4 MiB lie beyond the initial heap
    // whatever its offset (it is 8 MiB longer than that heap), so they were never used before.
    constexpr std::size_t kTail = (std::size_t{4} << 20) / sizeof(std::int64_t);
    const auto host = gputest::to_host(big.as<std::int64_t>() + big_total - kTail, kTail);
    std::size_t nonzero = 0;
    for (auto v : host) nonzero += v != 0;
    CHECK_MSG(nonzero == 0, std::to_string(nonzero) + " nonzero elements in freshly grown memory");
  }
  APERTURE_CUDA_CHECK(cudaMemset(big.ptr, 0, big.bytes), "test");  // its start may be reused space
  // The table did not move: the old map still holds the same table, in host and device memory.
  for (int p = 0; p < n; ++p) {
    CHECK(old_map.host_peer_bases()[p] == old_table[p]);
    if (old_map.is_direct(p))
      CHECK(big.map.host_peer_bases()[p] - old_table[p] ==
            reinterpret_cast<std::int64_t>(big.ptr) - reinterpret_cast<std::int64_t>(old.ptr));
  }
  CHECK(old_map.peer_bases() == old_device_table);
  const auto device_copy = gputest::to_host(old_device_table, n);
  for (int p = 0; p < n; ++p) CHECK(device_copy[p] == old_table[p]);
  // The old allocation still holds what the peers wrote, and still takes new writes through the
  // old map; the new one works from every peer, at its start and its far end.
  check_ends(job, old, kEnds, 10, "after growing: old allocation");
  job.sync();
  store_ends<<<kBlocks, kThreads>>>(old.as<std::int64_t>(), old_total, kEnds, me, n, old_device_table, 20);
  gputest::launched("store_ends (old, after the grow)");
  store_ends<<<kBlocks, kThreads>>>(big.as<std::int64_t>(), big_total, kEnds, me, n, big.map.peer_bases(), 30);
  gputest::launched("store_ends (big)");
  job.sync();
  check_ends(job, old, kEnds, 20, "after growing: old allocation, written through its old map");
  check_ends(job, big, kEnds, 30, "after growing: grown allocation");

  // Several more grows in a row, each checked, with equal offsets on every rank.
  std::vector<aperture::Allocation> more;
  for (int k = 0; k < 3; ++k) {
    more.push_back(provider.allocate(kInitialHeap - 4096, 4096));
    auto& a = more.back();
    APERTURE_CUDA_CHECK(cudaMemset(a.ptr, 0, a.bytes), "test");
    const std::int64_t offset = reinterpret_cast<std::int64_t>(a.ptr) - reinterpret_cast<std::int64_t>(old.ptr);
    std::vector<std::int64_t> offsets(n);
    job.team.allgather(&offset, offsets.data(), sizeof offset);
    for (int r = 0; r < n; ++r) CHECK(offsets[r] == offset);
    job.sync();
    store_ends<<<kBlocks, kThreads>>>(a.as<std::int64_t>(), a.bytes / sizeof(std::int64_t), kEnds, me, n,
                                      a.map.peer_bases(), 40 + 2 * k);
    gputest::launched("store_ends (more)");
    job.sync();
    check_ends(job, a, kEnds, 40 + 2 * k, ("grow " + std::to_string(k + 2)).c_str());
  }
  check_ends(job, big, kEnds, 30, "after more grows: grown allocation");

  // Beyond the reserved space: a clear error on every rank, and the heap still works.
  const auto too_big = error_of([&] { provider.allocate(2 * kReserve); });
  CHECK_MSG(contains(too_big, "no free block") && contains(too_big, "APERTURE_VMM_RESERVE"), too_big);
  auto after = provider.allocate(1 << 20);
  CHECK(after.ptr != nullptr);
  job.sync();
  provider.free(after);
  for (auto& a : more) provider.free(a);
  provider.free(big);
  provider.free(old);

  // Freed space is reused: an allocation as large as the grown heap's free part fits again.
  auto reused = provider.allocate(kInitialHeap * 2);
  APERTURE_CUDA_CHECK(cudaMemset(reused.ptr, 0, reused.bytes), "test");
  job.sync();
  store_ends<<<kBlocks, kThreads>>>(reused.as<std::int64_t>(), reused.bytes / sizeof(std::int64_t), kEnds, me, n,
                                    reused.map.peer_bases(), 50);
  gputest::launched("store_ends (reused)");
  job.sync();
  check_ends(job, reused, kEnds, 50, "reused space");
  job.sync();
  provider.free(reused);
}

// --- views ----------------------------------------------------------------------------------

void views(gputest::Job& job) {
  auto& provider = *job.provider;
  const int n = job.n;
  constexpr std::size_t kViewOffset = 1017;
  const std::size_t total = kViewOffset + n * kCount + 100;
  aperture::Allocation whole = provider.allocate(total * sizeof(std::int64_t));
  aperture::Allocation counter = provider.allocate(sizeof(unsigned long long));
  for (auto* a : {&whole, &counter}) APERTURE_CUDA_CHECK(cudaMemset(a->ptr, 0, a->bytes), "test");
  std::int64_t* view = whole.as<std::int64_t>() + kViewOffset;
  const std::size_t view_bytes = n * kCount * sizeof(std::int64_t);
  const aperture::SymmetricAddressMap vmap = provider.symmetric_address_map(view, view_bytes);
  gputest::check_view(job, whole, total, kViewOffset, vmap, kShape, counter.as<unsigned long long>());

  // What a view may not be.
  const auto past_end = error_of([&] { provider.symmetric_address_map(view + n * kCount, 101 * 8); });
  CHECK_MSG(contains(past_end, "not inside a live allocation"), past_end);
  gputest::check_foreign_memory_refused(job, provider);
  job.sync();
  provider.free(counter);
  gputest::free_and_check_stale_copy(job, provider, whole);
  const auto freed = error_of([&] { provider.symmetric_address_map(view, 8); });
  CHECK_MSG(contains(freed, "not inside a live allocation"), freed);
}

// --- around the provider --------------------------------------------------------------------

void bad_requests_and_environment(gputest::Job& job) {
  auto& provider = *job.provider;
  gputest::check_bad_alignment_refused(job, provider);
  const auto huge_align = error_of([&] { provider.allocate(100, std::size_t{1} << 30); });
  CHECK_MSG(contains(huge_align, "exceeds"), huge_align);
  auto aligned = provider.allocate(100, std::size_t{2} << 20);
  CHECK(reinterpret_cast<std::uintptr_t>(aligned.ptr) % (std::size_t{2} << 20) == 0);
  provider.free(aligned);
  {
    EnvOverride nonsense("APERTURE_VMM_RESERVE", "12Q");
    const auto bad = error_of([&] { aperture::make_provider("cuda-vmm", job.team); });
    CHECK_MSG(contains(bad, "APERTURE_VMM_RESERVE='12Q'"), bad);
  }
  {
    EnvOverride heap("APERTURE_GPU_HEAP_SIZE", "64M");
    EnvOverride reserve("APERTURE_VMM_RESERVE", "32M");
    const auto bad = error_of([&] { aperture::make_provider("cuda-vmm", job.team); });
    CHECK_MSG(contains(bad, "raise APERTURE_VMM_RESERVE"), bad);
  }
  job.team.barrier();
}

// A second provider beside the first; a map outlives its provider.
void second_provider(gputest::Job& job) {
  std::unique_ptr<aperture::Provider> second;
  {
    EnvOverride reserve("APERTURE_VMM_RESERVE", "256M");
    second = aperture::make_provider("cuda-vmm", job.team);
  }
  auto a = second->allocate(std::size_t{40} << 20);  // grows the second one
  auto b = job.provider->allocate(1 << 20);
  APERTURE_CUDA_CHECK(cudaMemset(a.ptr, 0, a.bytes), "test");
  CHECK(!b.map.owns(a.ptr));
  const auto wrong_heap = error_of([&] { job.provider->symmetric_address_map(a.ptr, 8); });
  CHECK_MSG(contains(wrong_heap, "another provider"), wrong_heap);
  job.sync();
  store_ends<<<kBlocks, kThreads>>>(a.as<std::int64_t>(), a.bytes / sizeof(std::int64_t), 256, job.me, job.n,
                                    a.map.peer_bases(), 60);
  gputest::launched("store_ends (second provider)");
  job.sync();
  check_ends(job, a, 256, 60, "second provider");
  const aperture::SymmetricAddressMap kept = a.map;
  job.sync();
  second->free(a);
  job.provider->free(b);
  second.reset();
  const auto table = gputest::to_host(kept.peer_bases(), job.n);
  for (int p = 0; p < job.n; ++p) CHECK(table[p] == kept.host_peer_bases()[p]);
}

// The provider works whichever device the caller made current since, and leaves it current;
// larger than all the heap has mapped so far: a grow, too, with another device current.
void other_current_device(gputest::Job& job) { gputest::check_other_current_device(job, kInitialHeap * 6); }

}  // namespace

int main() {
  return gputest::run_main(kProgram, [] {
    ::setenv("APERTURE_GPU_HEAP_SIZE", "32M", 1);  // small, so that the grow path runs
    ::setenv("APERTURE_VMM_RESERVE", "1G", 1);
    auto job_ptr = gputest::start(kProgram, "cuda-vmm");
    gputest::Job& job = *job_ptr;
    identity_and_table(job);
    store_load_put_get(job);
    atomics_between_gpus(job);
    signals(job);
    gputest::cross_allocation(job, kShape, gputest::Fresh::reused);
    views(job);
    growth(job);
    bad_requests_and_environment(job);
    second_provider(job);
    other_current_device(job);
    job.sync();
    return gputest::finish(job, kProgram);
  });
}
