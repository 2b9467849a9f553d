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

#include "gpu_test.h"

namespace {

using gputest::pattern;

constexpr const char* kProgram = "gpu_vmm_test";
constexpr std::size_t kInitialHeap = std::size_t{32} << 20;
constexpr std::size_t kReserve = std::size_t{1} << 30;
constexpr std::size_t kCount = std::size_t{1} << 14;  // elements per slot
constexpr std::size_t kChunk = 32;                   // elements one thread puts/gets
constexpr int kBlocks = 64;
constexpr int kThreads = 256;
constexpr std::uint64_t kTimeoutNs = 20'000'000'000ull;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

template <class Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const aperture::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Sets an environment variable for its lifetime, then puts it back as it was.
class EnvOverride {
 public:
  EnvOverride(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    ::setenv(name, value, 1);
  }
  ~EnvOverride() { saved_ ? (void)::setenv(name_, saved_->c_str(), 1) : (void)::unsetenv(name_); }
  EnvOverride(const EnvOverride&) = delete;
  EnvOverride& operator=(const EnvOverride&) = delete;

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

int device_of(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return attributes.type == cudaMemoryTypeDevice ? attributes.device : -1;
}

// gputest::start, on cuda-vmm.
std::unique_ptr<gputest::Job> start() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0) {
    std::printf("SKIP: %s: no GPU here\n", kProgram);
    std::fflush(stdout);
    std::exit(gputest::kSkipStatus);
  }
  for (const auto& status : aperture::provider_statuses()) {
    if (status.name != "cuda-vmm" || status.available) continue;
    std::printf("SKIP: %s: provider cuda-vmm is not available: %s\n", kProgram, status.reason.c_str());
    std::fflush(stdout);
    std::exit(gputest::kSkipStatus);
  }
  auto job = std::unique_ptr<gputest::Job>(new gputest::Job{aperture::Team::from_env(), nullptr});
  job->provider = aperture::make_provider("cuda-vmm", job->team);
  job->me = job->team.rank();
  job->n = job->team.size();
  job->checker.rank = job->me;
  int device = -1;
  APERTURE_CUDA_CHECK(cudaGetDevice(&device), "test");
  std::printf("rank %d of %d: %s on GPU %d of %d\n", job->me, job->n, kProgram, device, count);
  std::fflush(stdout);
  return job;
}

__device__ std::size_t thread_index() { return blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; }
__device__ std::size_t thread_count() { return static_cast<std::size_t>(gridDim.x) * blockDim.x; }

template <class T>
__global__ void fill(T* data, std::size_t count, int rank, int salt) {
  for (std::size_t i = thread_index(); i < count; i += thread_count()) data[i] = pattern<T>(rank, i, salt);
}

// inbox[me][i] of every direct peer = pattern(me, i, salt), one store per element.
__global__ void store_to_peers(std::int64_t* inbox, std::size_t count, int me, int n, const std::int64_t* table,
                               int salt) {
  for (int p = 0; p < n; ++p) {
    if (table[p] == 0) continue;
    for (std::size_t i = thread_index(); i < count; i += thread_count())
      aperture::store(&inbox[me * count + i], pattern<std::int64_t>(me, i, salt), me, p, table);
  }
}

// Expected inbox of `slots` slots of `count`: slot s holds pattern(s, i, salt) where s reaches me.
std::vector<std::int64_t> expected_inbox(gputest::Job& job, std::size_t count, int salt) {
  std::vector<std::int64_t> expected(job.n * count, 0);
  for (int s = 0; s < job.n; ++s)
    if (job.reaches(s, job.me))
      for (std::size_t i = 0; i < count; ++i) expected[s * count + i] = pattern<std::int64_t>(s, i, salt);
  return expected;
}

// --- the table ------------------------------------------------------------------------------

void identity_and_table(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  CHECK(provider.name() == "cuda-vmm");
  CHECK(provider.memory_kind() == aperture::MemoryKind::device);
  CHECK(provider.is_linear());
  int count = 0, device = -1;
  APERTURE_CUDA_CHECK(cudaGetDeviceCount(&count), "test");
  APERTURE_CUDA_CHECK(cudaGetDevice(&device), "test");
  CHECK_MSG(device == job.team.local_rank() % count, "took GPU " + std::to_string(device));

  aperture::Allocation a = provider.allocate(4096 * sizeof(std::int64_t));
  aperture::Allocation b = provider.allocate(1000);
  job.learn_direct(a.map);
  std::string peers;
  for (int p = 0; p < n; ++p) peers += (a.map.is_direct(p) ? " direct" : " NOT-direct");
  std::printf("rank %d: peers:%s\n", me, peers.c_str());
  for (const aperture::Allocation* x : {&a, &b}) {
    CHECK(x->map.local_rank == me && x->map.world_size == n);
    CHECK(x->map.allocation_base == reinterpret_cast<std::uintptr_t>(x->ptr));
    CHECK(x->map.allocation_bytes == x->bytes);
    CHECK(x->map.host_peer_bases()[me] == static_cast<std::int64_t>(x->map.allocation_base));
    CHECK(x->map.owns(x->ptr, x->bytes));
    CHECK(device_of(x->ptr) == device);
    CHECK(device_of(x->map.peer_bases()) == device);
    const auto on_device = gputest::to_host(x->map.peer_bases(), n);
    for (int p = 0; p < n; ++p) CHECK(on_device[p] == x->map.host_peer_bases()[p]);
  }
  for (int p = 0; p < n; ++p)
    if (job.team.same_node(p)) CHECK_MSG(a.map.is_direct(p), "same-node peer " + std::to_string(p) + " not direct");
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
  const auto fresh = gputest::to_host(a.as<std::int64_t>(), 4096);
  bool zero = true;
  for (auto v : fresh) zero = zero && v == 0;
  CHECK_MSG(zero, "fresh memory is zeroed");
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
  fill<<<kBlocks, kThreads>>>(src, kCount, me, 2);
  gputest::launched("fill");
  job.sync();
  rma<<<kBlocks, kThreads>>>(src, stored, put, loaded, got, me, n, all.map.peer_bases());
  gputest::launched("rma");
  job.sync();
  const auto host = gputest::to_host(src, (1 + 4 * static_cast<std::size_t>(n)) * kCount);
  std::vector<std::int64_t> from_peers(n * kCount, 0), from_sources = expected_inbox(job, kCount, 1);
  std::vector<std::int64_t> puts = expected_inbox(job, kCount, 2);
  for (int p = 0; p < n; ++p)
    if (job.reaches(me, p))
      for (std::size_t i = 0; i < kCount; ++i) from_peers[p * kCount + i] = pattern<std::int64_t>(p, i, 2);
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

// --- one table for every allocation ---------------------------------------------------------

void cross_allocation(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  aperture::Allocation first = provider.allocate(64);
  aperture::Allocation gap = provider.allocate(12345);
  aperture::Allocation target = provider.allocate(n * kCount * sizeof(std::int64_t), 4096);
  APERTURE_CUDA_CHECK(cudaMemset(target.ptr, 0, target.bytes), "test");
  const std::int64_t distance = reinterpret_cast<std::int64_t>(target.ptr) - reinterpret_cast<std::int64_t>(first.ptr);
  std::vector<std::int64_t> distances(n);
  job.team.allgather(&distance, distances.data(), sizeof distance);
  for (int r = 0; r < n; ++r) CHECK(distances[r] == distance);  // same offsets on every rank
  for (int p = 0; p < n; ++p)
    if (first.map.is_direct(p))
      CHECK(aperture::translate(target.as<std::int64_t>(), me, p, first.map.host_peer_bases().data()) ==
            aperture::translate(target.as<std::int64_t>(), me, p, target.map.host_peer_bases().data()));
  job.sync();
  store_to_peers<<<kBlocks, kThreads>>>(target.as<std::int64_t>(), kCount, me, n, first.map.peer_bases(), 6);
  gputest::launched("store_to_peers (another allocation's table)");
  job.sync();
  const auto host = gputest::to_host(target.as<std::int64_t>(), n * kCount);
  CHECK_RANGE(host.data(), expected_inbox(job, kCount, 6), "cross-allocation: stored with another allocation's table");
  job.sync();
  provider.free(target);
  provider.free(gap);
  provider.free(first);
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
  CHECK_RANGE(head.data(), expected_inbox(job, count, salt), (std::string(what) + ": first elements").c_str());
  CHECK_RANGE(tail.data(), expected_inbox(job, count, salt + 1), (std::string(what) + ": last elements").c_str());
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

__global__ void store_through_view(std::int64_t* view, int me, int n, const std::int64_t* view_table,
                                   const std::int64_t* whole_table, unsigned long long* disagreements) {
  for (int p = 0; p < n; ++p) {
    if (view_table[p] == 0) continue;
    for (std::size_t i = thread_index(); i < kCount; i += thread_count()) {
      std::int64_t* through_view = aperture::translate(&view[me * kCount + i], me, p, view_table);
      if (through_view != aperture::translate(&view[me * kCount + i], me, p, whole_table))
        atomicAdd(disagreements, 1ull);
      *through_view = pattern<std::int64_t>(me, i, 5);
    }
  }
}

void views(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  constexpr std::size_t kViewOffset = 1017;
  const std::size_t total = kViewOffset + n * kCount + 100;
  aperture::Allocation whole = provider.allocate(total * sizeof(std::int64_t));
  aperture::Allocation counter = provider.allocate(sizeof(unsigned long long));
  for (auto* a : {&whole, &counter}) APERTURE_CUDA_CHECK(cudaMemset(a->ptr, 0, a->bytes), "test");
  std::int64_t* view = whole.as<std::int64_t>() + kViewOffset;
  const std::size_t view_bytes = n * kCount * sizeof(std::int64_t);
  const aperture::SymmetricAddressMap vmap = provider.symmetric_address_map(view, view_bytes);
  CHECK(vmap.local_rank == me && vmap.world_size == n);
  CHECK(vmap.allocation_base == reinterpret_cast<std::uintptr_t>(view));
  CHECK(vmap.allocation_bytes == view_bytes);
  for (int p = 0; p < n; ++p)
    CHECK(vmap.host_peer_bases()[p] ==
          (whole.map.is_direct(p) ? whole.map.host_peer_bases()[p] + std::int64_t{kViewOffset * 8} : 0));
  const auto device_copy = gputest::to_host(vmap.peer_bases(), n);
  for (int p = 0; p < n; ++p) CHECK(device_copy[p] == vmap.host_peer_bases()[p]);
  job.sync();
  store_through_view<<<kBlocks, kThreads>>>(view, me, n, vmap.peer_bases(), whole.map.peer_bases(),
                                            counter.as<unsigned long long>());
  gputest::launched("store_through_view");
  job.sync();
  CHECK(gputest::to_host(counter.as<unsigned long long>(), 1)[0] == 0);
  const auto host = gputest::to_host(whole.as<std::int64_t>(), total);
  std::vector<std::int64_t> expected(total, 0);
  const auto inbox = expected_inbox(job, kCount, 5);
  std::copy(inbox.begin(), inbox.end(), expected.begin() + kViewOffset);
  CHECK_RANGE(host.data(), expected, "view: whole[view offset + source slot] == pattern(source), 0 elsewhere");

  // What a view may not be.
  const auto past_end = error_of([&] { provider.symmetric_address_map(view + n * kCount, 101 * 8); });
  CHECK_MSG(contains(past_end, "not inside a live allocation"), past_end);
  void* foreign = nullptr;
  APERTURE_CUDA_CHECK(cudaMalloc(&foreign, 256), "test");
  const auto not_ours = error_of([&] { provider.symmetric_address_map(foreign, 16); });
  CHECK_MSG(contains(not_ours, "another provider"), not_ours);
  aperture::Allocation stranger{foreign, 256, {}};
  const auto free_foreign = error_of([&] { provider.free(stranger); });
  CHECK_MSG(contains(free_foreign, "another provider"), free_foreign);
  APERTURE_CUDA_CHECK(cudaFree(foreign), "test");
  job.sync();
  provider.free(counter);
  auto copy = whole;
  provider.free(whole);
  // free marks the map freed for every copy: the checked path refuses the stale copy.
  CHECK(copy.map.freed());
  const auto stale = error_of([&] { aperture::checked_translate(copy.map, copy.as<char>(), job.me); });
  CHECK_MSG(contains(stale, "use after free"), stale);
  const auto twice = error_of([&] { provider.free(copy); });
  CHECK_MSG(contains(twice, "freed twice"), twice);
  const auto freed = error_of([&] { provider.symmetric_address_map(view, 8); });
  CHECK_MSG(contains(freed, "not inside a live allocation"), freed);
}

// --- around the provider --------------------------------------------------------------------

void bad_requests_and_environment(gputest::Job& job) {
  auto& provider = *job.provider;
  const auto odd = error_of([&] { provider.allocate(100, 3); });
  CHECK_MSG(contains(odd, "not a power of two"), odd);
  // A bad request on one rank fails every rank at once (compared before it is judged), no hang.
  if (job.n > 1) {
    const auto one_bad = error_of([&] { provider.allocate(100, job.me == job.n - 1 ? 3 : 256); });
    CHECK_MSG(contains(one_bad, "mismatch") && contains(one_bad, "alignment=3"), one_bad);
  }
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

// The provider works whichever device the caller made current since, and leaves it current.
void other_current_device(gputest::Job& job) {
  int count = 0, mine = -1;
  APERTURE_CUDA_CHECK(cudaGetDeviceCount(&count), "test");
  APERTURE_CUDA_CHECK(cudaGetDevice(&mine), "test");
  const int other = (mine + 1) % count;
  APERTURE_CUDA_CHECK(cudaSetDevice(other), "test");
  // Larger than all the heap has mapped so far: a grow, too, with another device current.
  auto a = job.provider->allocate(kInitialHeap * 6);
  int now = -1;
  APERTURE_CUDA_CHECK(cudaGetDevice(&now), "test");
  CHECK(now == other);
  CHECK(device_of(a.ptr) == mine);
  CHECK(device_of(a.map.peer_bases()) == mine);
  job.provider->free(a);
  APERTURE_CUDA_CHECK(cudaSetDevice(mine), "test");
}

}  // namespace

int main() {
  return gputest::run_main(kProgram, [] {
    ::setenv("APERTURE_GPU_HEAP_SIZE", "32M", 1);  // small, so that the grow path runs
    ::setenv("APERTURE_VMM_RESERVE", "1G", 1);
    auto job_ptr = start();
    gputest::Job& job = *job_ptr;
    identity_and_table(job);
    store_load_put_get(job);
    atomics_between_gpus(job);
    signals(job);
    cross_allocation(job);
    views(job);
    growth(job);
    bad_requests_and_environment(job);
    second_provider(job);
    other_current_device(job);
    job.sync();
    return gputest::finish(job, kProgram);
  });
}
