// tests/gpu/foreign_memory_ops.cuh — every device operation on memory some other library
// allocated (NVSHMEM, NCCL), with kernels that never learn which one.
//
// The point of aperture: a kernel written once against peer_bases runs unmodified on memory
// from any provider, with no heap of aperture's in the process. The programs that include this
// make exactly one provider (or, in mixed_providers_test, two foreign ones) and never a
// cuda-ipc heap; every kernel here is the same for every provider.
//
// Conventions of gpu_test.h: values distinct per rank, element and operation; every element
// checked on the host; "SKIP: ..." and exit 77 where the provider cannot run; a PASS/FAIL line
// per rank.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu_test.h"

namespace foreign {

using gputest::pattern;

constexpr std::size_t kCount = std::size_t{1} << 13;  // elements per slot
constexpr std::size_t kChunk = 32;                   // elements one thread puts/gets/copies
constexpr int kBlocks = 32;
constexpr int kThreads = 256;
constexpr std::uint64_t kWaitTimeoutNs = 30'000'000'000ull;

[[noreturn]] inline void skip(const std::string& why) {
  std::printf("SKIP: %s\n", why.c_str());
  std::fflush(stdout);
  std::exit(gputest::kSkipStatus);
}

inline const aperture::ProviderStatus* status_of(const std::vector<aperture::ProviderStatus>& all, const char* name) {
  for (const auto& s : all)
    if (s.name == name) return &s;
  return nullptr;
}

// Skips (77) unless there is a GPU and every provider named is available here.
inline void require(const char* program, std::initializer_list<const char*> providers) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0)
    skip(std::string(program) + ": no GPU here (" +
         (rc != cudaSuccess ? aperture::detail::cuda_error_text(rc) : std::string("cudaGetDeviceCount reported 0")) +
         ")");
  const auto all = aperture::provider_statuses();
  for (const char* name : providers) {
    const auto* s = status_of(all, name);
    if (s == nullptr) skip(std::string(program) + ": aperture does not know provider " + name);
    if (!s->available) skip(std::string(program) + ": provider " + name + " is not available: " + s->reason);
  }
}

// Starts the job on `provider` (skipping where it cannot run). No other provider is made.
inline std::unique_ptr<gputest::Job> start(const char* program, const char* provider) {
  require(program, {provider});
  auto job = std::unique_ptr<gputest::Job>(new gputest::Job{aperture::Team::from_env(), nullptr});
  int count = 0;
  APERTURE_CUDA_CHECK(cudaGetDeviceCount(&count), "test");
  if (job->team.local_size() > count)  // every rank of this machine sees the same and skips
    skip(std::string(program) + ": " + std::to_string(job->team.local_size()) + " ranks on this machine but " +
         std::to_string(count) + " GPU(s); " + provider + " needs one GPU per rank");
  job->provider = aperture::make_provider(provider, job->team);
  job->me = job->team.rank();
  job->n = job->team.size();
  job->checker.rank = job->me;
  int device = -1;
  APERTURE_CUDA_CHECK(cudaGetDevice(&device), "test");
  cudaDeviceProp prop{};
  APERTURE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device), "test");
  std::printf("rank %d of %d: %s on %s memory, GPU %d (%s); no aperture heap in this process\n", job->me, job->n,
              program, provider, device, prop.name);
  std::fflush(stdout);
  return job;
}

template <class Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const aperture::Error& e) {
    return e.what();
  }
  return "(no error)";
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

inline int device_of(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return attributes.type == cudaMemoryTypeDevice ? attributes.device : -1;
}

// Expected contents of `slots` slots: slot s holds pattern(source_of(s), i, salt) where
// written(s), else 0.
template <class T, class Written, class Source>
std::vector<T> expected_slots(std::size_t slots, int salt, Written written, Source source_of) {
  std::vector<T> expected(slots * kCount, T(0));
  for (std::size_t s = 0; s < slots; ++s)
    if (written(s))
      for (std::size_t i = 0; i < kCount; ++i) expected[s * kCount + i] = pattern<T>(source_of(s), i, salt);
  return expected;
}

// ---- the kernels: written once, for any provider's table -----------------------------------------

__device__ inline std::size_t thread_index() { return blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; }
__device__ inline std::size_t thread_count() { return static_cast<std::size_t>(gridDim.x) * blockDim.x; }

template <class T>
__global__ void fill(T* data, std::size_t count, int rank, int salt) {
  for (std::size_t i = thread_index(); i < count; i += thread_count()) data[i] = pattern<T>(rank, i, salt);
}

// The headline kernel: every thread stores into its slot of every direct peer's buffer.
template <class T>
__global__ void store_to_peers(T* inbox, int me, int n, const std::int64_t* table, int salt) {
  for (int p = 0; p < n; ++p) {
    if (table[p] == 0) continue;
    for (std::size_t i = thread_index(); i < kCount; i += thread_count())
      aperture::store(&inbox[me * kCount + i], pattern<T>(me, i, salt), me, p, table);
  }
}

template <class T>
__global__ void load_from_peers(T* result, const T* src, int me, int n, const std::int64_t* src_table) {
  for (int p = 0; p < n; ++p) {
    if (src_table[p] == 0) continue;
    for (std::size_t i = thread_index(); i < kCount; i += thread_count())
      result[p * kCount + i] = aperture::load(&src[i], me, p, src_table);
  }
}

template <class T>
__global__ void put_to_peers(T* inbox, const T* src, int me, int n, const std::int64_t* inbox_table) {
  for (int p = 0; p < n; ++p) {
    if (inbox_table[p] == 0) continue;
    for (std::size_t c = thread_index(); c < kCount / kChunk; c += thread_count())
      aperture::put(&inbox[me * kCount + c * kChunk], &src[c * kChunk], kChunk, me, p, inbox_table);
  }
}

template <class T>
__global__ void get_from_peers(T* result, const T* src, int me, int n, const std::int64_t* src_table) {
  for (int p = 0; p < n; ++p) {
    if (src_table[p] == 0) continue;
    for (std::size_t c = thread_index(); c < kCount / kChunk; c += thread_count())
      aperture::get(&result[p * kCount + c * kChunk], &src[c * kChunk], kChunk, me, p, src_table);
  }
}

// Third-party copies a's src -> b's inbox[me][a]; src and inbox are regions of one allocation.
template <class T>
__global__ void copy_between_peers(T* inbox, const T* src, int me, int n, const std::int64_t* table) {
  for (int a = 0; a < n; ++a) {
    if (table[a] == 0) continue;
    for (int b = 0; b < n; ++b) {
      if (table[b] == 0) continue;
      for (std::size_t c = thread_index(); c < kCount / kChunk; c += thread_count())
        aperture::copy(&inbox[(static_cast<std::size_t>(me) * n + a) * kCount + c * kChunk], &src[c * kChunk], kChunk,
                       /*src_rank=*/a, /*dst_rank=*/b, /*cur_rank=*/me, table);
    }
  }
}

// Word layout of the atomics buffer: 8 shared counters, then one slot per source for cas/xchg.
enum AtomicWord { kAdd, kSub, kOr, kAnd, kXor, kMin, kMax, kFlip, kWords };

__global__ void atomics_to_peers(std::int64_t* words, int me, int n, const std::int64_t* table,
                                 std::int64_t* cas_seen, std::int64_t* xchg_seen) {
  for (int p = 0; p < n; ++p) {
    if (table[p] == 0) continue;
    aperture::atomic_add(&words[kAdd], std::int64_t{me + 1}, me, p, table);
    aperture::atomic_sub(&words[kSub], std::int64_t{1}, me, p, table);
    if (thread_index() == 0) {
      aperture::atomic_or(&words[kOr], std::int64_t{1} << me, me, p, table);
      aperture::atomic_and(&words[kAnd], ~(std::int64_t{1} << me), me, p, table);
      aperture::atomic_xor(&words[kXor], std::int64_t{1} << (me + 20), me, p, table);
      aperture::atomic_min(&words[kMin], std::int64_t{-100 - me}, me, p, table);
      aperture::atomic_max(&words[kMax], std::int64_t{100 + me}, me, p, table);
      cas_seen[p] = aperture::atomic_cas(&words[kWords + me], std::int64_t{0}, std::int64_t{me + 1}, me, p, table);
      xchg_seen[p] = aperture::atomic_xchg(&words[kWords + n + me], std::int64_t{7 * (me + 1)}, me, p, table,
                                           aperture::order::seq_cst, aperture::scope::system);
    }
  }
}

struct RingOutcome {
  unsigned long long timeouts;
  unsigned long long wrong;
};

// Rank me puts its values into the next rank's data and signals its flag, then waits for the
// previous rank's and checks what arrived: the release/acquire pair carries the data.
__global__ void signal_ring(aperture::PeerView peers, std::int64_t* data, std::uint64_t* flag, std::uint64_t round,
                            RingOutcome* outcome) {
  const int me = peers.rank, n = peers.world_size;
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  for (std::size_t i = threadIdx.x; i < kCount; i += blockDim.x)
    peers.store(&data[i], pattern<std::int64_t>(me, i, static_cast<int>(round)), next);
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    peers.signal(flag, round, next);
  }
  __shared__ int ok;
  if (threadIdx.x == 0) {
    std::uint64_t seen = 0;
    ok = aperture::wait_until_ge_for(flag, round, kWaitTimeoutNs, &seen) ? 1 : 0;
    if (!ok) atomicAdd(&outcome->timeouts, 1ull);
  }
  __syncthreads();
  if (!ok) return;
  for (std::size_t i = threadIdx.x; i < kCount; i += blockDim.x)
    if (data[i] != pattern<std::int64_t>(prev, i, static_cast<int>(round))) atomicAdd(&outcome->wrong, 1ull);
}

__global__ void store_through_view(std::int64_t* view, int me, int n, const std::int64_t* view_table,
                                   const std::int64_t* whole_table, unsigned long long* disagreements) {
  for (int p = 0; p < n; ++p) {
    if (view_table[p] == 0) continue;
    for (std::size_t i = thread_index(); i < kCount; i += thread_count()) {
      std::int64_t* through_view = aperture::translate(&view[me * kCount + i], me, p, view_table);
      std::int64_t* through_whole = aperture::translate(&view[me * kCount + i], me, p, whole_table);
      if (through_view != through_whole) atomicAdd(disagreements, 1ull);
      *through_view = pattern<std::int64_t>(me, i, 5);
    }
  }
}

// ---- the checks ------------------------------------------------------------------------------------

// The provider's identity, its tables (host and device copies agree, device table on this
// rank's GPU), direct same-machine peers, and zeroed fresh memory.
inline void identity_and_tables(gputest::Job& job, const char* name, bool linear) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  CHECK(provider.name() == name);
  CHECK(provider.memory_kind() == aperture::MemoryKind::device);
  CHECK(provider.is_linear() == linear);
  int count = 0, device = -1;
  APERTURE_CUDA_CHECK(cudaGetDeviceCount(&count), "test");
  APERTURE_CUDA_CHECK(cudaGetDevice(&device), "test");
  CHECK_MSG(device == job.team.local_rank() % count,
            "rank " + std::to_string(me) + " took GPU " + std::to_string(device) + " of " + std::to_string(count));
  aperture::Allocation a = provider.allocate(4096 * sizeof(std::int64_t));
  aperture::Allocation b = provider.allocate(1000);
  if (job.direct.empty()) job.learn_direct(a.map);
  std::string peers;
  for (int p = 0; p < n; ++p) peers += (a.map.is_direct(p) ? " direct" : " NOT-direct");
  std::printf("rank %d: %s peers:%s\n", me, name, peers.c_str());
  for (const aperture::Allocation* x : {&a, &b}) {
    CHECK(x->map.local_rank == me);
    CHECK(x->map.world_size == n);
    CHECK(x->map.allocation_base == reinterpret_cast<std::uintptr_t>(x->ptr));
    CHECK(x->map.allocation_bytes == x->bytes);
    CHECK(x->map.host_peer_bases()[me] == static_cast<std::int64_t>(x->map.allocation_base));
    CHECK(x->map.owns(x->ptr, x->bytes));
    CHECK(device_of(x->ptr) == device);               // the memory is on this rank's GPU
    CHECK(device_of(x->map.peer_bases()) == device);  // so is the kernels' table
    const auto on_device = gputest::to_host(x->map.peer_bases(), n);
    for (int p = 0; p < n; ++p) CHECK(on_device[p] == x->map.host_peer_bases()[p]);
    for (int p = 0; p < n; ++p)
      if (p != me && x->map.is_direct(p)) CHECK(x->map.host_peer_bases()[p] != x->map.host_peer_bases()[me]);
  }
  for (int p = 0; p < n; ++p)
    if (job.team.same_node(p)) CHECK_MSG(a.map.is_direct(p), "same-node peer " + std::to_string(p) + " not direct");
  const auto fresh = gputest::to_host(a.as<std::int64_t>(), 4096);
  bool zero = true;
  for (auto v : fresh) zero = zero && v == 0;
  CHECK_MSG(zero, "fresh memory is zeroed");
  job.sync();
  provider.free(b);
  provider.free(a);
  CHECK(a.ptr == nullptr && !a.map.has_table());
}

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  if constexpr (std::is_same_v<T, float>) return "float";
  return "double";
}

// store, load, put, get and copy against every direct peer.
template <class T>
void rma(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  const std::size_t slot_bytes = kCount * sizeof(T);
  // src and the copy inbox in one allocation: copy() translates both legs with one table.
  aperture::Allocation src_and_copy = provider.allocate(slot_bytes * (1 + static_cast<std::size_t>(n) * n));
  aperture::Allocation inbox = provider.allocate(slot_bytes * n);
  aperture::Allocation put_inbox = provider.allocate(slot_bytes * n);
  aperture::Allocation loaded = provider.allocate(slot_bytes * n);
  aperture::Allocation got = provider.allocate(slot_bytes * n);
  if (job.direct.empty()) job.learn_direct(inbox.map);
  T* src = src_and_copy.as<T>();
  T* copy_inbox = src + kCount;
  fill<<<kBlocks, kThreads>>>(src, kCount, me, 2);
  gputest::launched("fill");
  job.sync();  // every rank's src is written before anyone reaches out

  store_to_peers<<<kBlocks, kThreads>>>(inbox.as<T>(), me, n, inbox.map.peer_bases(), 1);
  gputest::launched("store_to_peers");
  load_from_peers<<<kBlocks, kThreads>>>(loaded.as<T>(), src, me, n, src_and_copy.map.peer_bases());
  gputest::launched("load_from_peers");
  put_to_peers<<<kBlocks, kThreads>>>(put_inbox.as<T>(), src, me, n, put_inbox.map.peer_bases());
  gputest::launched("put_to_peers");
  get_from_peers<<<kBlocks, kThreads>>>(got.as<T>(), src, me, n, src_and_copy.map.peer_bases());
  gputest::launched("get_from_peers");
  copy_between_peers<<<kBlocks, kThreads>>>(copy_inbox, src, me, n, src_and_copy.map.peer_bases());
  gputest::launched("copy_between_peers");
  job.sync();

  const std::string t = type_name<T>();
  const auto identity = [](std::size_t s) { return static_cast<int>(s); };
  const auto from_source = [&](std::size_t s) { return job.reaches(int(s), me); };
  const auto to_peer = [&](std::size_t p) { return job.reaches(me, int(p)); };
  CHECK_RANGE(gputest::to_host(inbox.as<T>(), n * kCount).data(), expected_slots<T>(n, 1, from_source, identity),
              ("store " + t).c_str());
  CHECK_RANGE(gputest::to_host(loaded.as<T>(), n * kCount).data(), expected_slots<T>(n, 2, to_peer, identity),
              ("load " + t).c_str());
  CHECK_RANGE(gputest::to_host(put_inbox.as<T>(), n * kCount).data(), expected_slots<T>(n, 2, from_source, identity),
              ("put " + t).c_str());
  CHECK_RANGE(gputest::to_host(got.as<T>(), n * kCount).data(), expected_slots<T>(n, 2, to_peer, identity),
              ("get " + t).c_str());
  CHECK_RANGE(gputest::to_host(copy_inbox, static_cast<std::size_t>(n) * n * kCount).data(),
              expected_slots<T>(
                  static_cast<std::size_t>(n) * n, 2,
                  [&](std::size_t s) { return job.reaches(int(s) / n, int(s) % n) && job.reaches(int(s) / n, me); },
                  [&](std::size_t s) { return int(s) % n; }),
              ("copy " + t).c_str());
  job.sync();  // nobody frees while a peer still reads
  for (auto* a : {&got, &loaded, &put_inbox, &inbox, &src_and_copy}) provider.free(*a);
}

// Every atomic, from every rank into every direct peer.
inline void atomics(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  const std::size_t words = kWords + 2 * static_cast<std::size_t>(n);
  aperture::Allocation buffer = provider.allocate(words * sizeof(std::int64_t));
  if (job.direct.empty()) job.learn_direct(buffer.map);
  std::vector<std::int64_t> initial(words, 0);
  initial[kAnd] = -1;
  initial[kSub] = 1'000'000'000;
  APERTURE_CUDA_CHECK(cudaMemcpy(buffer.ptr, initial.data(), words * sizeof(std::int64_t), cudaMemcpyHostToDevice),
                      "test");
  std::int64_t* seen = nullptr;
  APERTURE_CUDA_CHECK(cudaMalloc(&seen, 2 * n * sizeof(std::int64_t)), "test");
  APERTURE_CUDA_CHECK(cudaMemset(seen, 0xff, 2 * n * sizeof(std::int64_t)), "test");
  job.sync();
  atomics_to_peers<<<kBlocks, kThreads>>>(buffer.as<std::int64_t>(), me, n, buffer.map.peer_bases(), seen, seen + n);
  gputest::launched("atomics_to_peers");
  job.sync();

  const auto host = gputest::to_host(buffer.as<std::int64_t>(), words);
  const std::int64_t threads = static_cast<std::int64_t>(kBlocks) * kThreads;
  std::int64_t add = 0, sub = 1'000'000'000, bits_or = 0, bits_and = -1, bits_xor = 0, lo = 0, hi = 0;
  for (int s = 0; s < n; ++s) {
    if (!job.reaches(s, me)) continue;
    add += (s + 1) * threads;
    sub -= threads;
    bits_or |= std::int64_t{1} << s;
    bits_and &= ~(std::int64_t{1} << s);
    bits_xor ^= std::int64_t{1} << (s + 20);
    lo = std::min<std::int64_t>(lo, -100 - s);
    hi = std::max<std::int64_t>(hi, 100 + s);
  }
  CHECK_MSG(host[kAdd] == add, "atomic_add: got " + std::to_string(host[kAdd]) + ", expected " + std::to_string(add));
  CHECK_MSG(host[kSub] == sub, "atomic_sub: got " + std::to_string(host[kSub]) + ", expected " + std::to_string(sub));
  CHECK_MSG(host[kOr] == bits_or, "atomic_or");
  CHECK_MSG(host[kAnd] == bits_and, "atomic_and");
  CHECK_MSG(host[kXor] == bits_xor, "atomic_xor");
  CHECK_MSG(host[kMin] == lo, "atomic_min");
  CHECK_MSG(host[kMax] == hi, "atomic_max");
  for (int s = 0; s < n; ++s) {
    const bool reached = job.reaches(s, me);
    CHECK_MSG(host[kWords + s] == (reached ? s + 1 : 0), "atomic_cas slot " + std::to_string(s));
    CHECK_MSG(host[kWords + n + s] == (reached ? 7 * (s + 1) : 0), "atomic_xchg slot " + std::to_string(s));
  }
  const auto returned = gputest::to_host(seen, 2 * static_cast<std::size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (!job.reaches(me, p)) continue;
    CHECK_MSG(returned[p] == 0, "atomic_cas returned the old value 0 at rank " + std::to_string(p));
    CHECK_MSG(returned[n + p] == 0, "atomic_xchg returned the old value 0 at rank " + std::to_string(p));
  }
  job.sync();
  APERTURE_CUDA_CHECK(cudaFree(seen), "test");
  provider.free(buffer);
}

// signal / wait_until_ge around a ring, several rounds on the same flag.
inline void signals(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  aperture::Allocation a = provider.allocate(kCount * sizeof(std::int64_t) + sizeof(std::uint64_t));
  if (job.direct.empty()) job.learn_direct(a.map);
  bool ring_direct = true;
  for (int r = 0; r < n; ++r) ring_direct = ring_direct && job.reaches(r, (r + 1) % n);
  if (!ring_direct) {
    std::printf("rank %d: signal ring skipped: not every rank reaches the next one directly\n", me);
    job.sync();
    provider.free(a);
    return;
  }
  auto* data = a.as<std::int64_t>();
  auto* flag = reinterpret_cast<std::uint64_t*>(data + kCount);
  RingOutcome* outcome = nullptr;
  APERTURE_CUDA_CHECK(cudaMalloc(&outcome, sizeof(RingOutcome)), "test");
  APERTURE_CUDA_CHECK(cudaMemset(outcome, 0, sizeof(RingOutcome)), "test");
  for (std::uint64_t round = 1; round <= 4; ++round) {
    job.sync();  // everyone checked the last round before its data is overwritten
    signal_ring<<<1, 512>>>(a.map.peer_view(), data, flag, round, outcome);
    gputest::launched("signal_ring");
    job.sync();
  }
  const RingOutcome o = gputest::to_host(outcome, 1)[0];
  CHECK_MSG(o.timeouts == 0, "signal ring: " + std::to_string(o.timeouts) + " waits timed out");
  CHECK_MSG(o.wrong == 0, "signal ring: " + std::to_string(o.wrong) + " elements wrong right after the wait");
  CHECK(gputest::to_host(flag, 1)[0] == 4);
  APERTURE_CUDA_CHECK(cudaFree(outcome), "test");
  provider.free(a);
}

// symmetric_address_map of a sub-range of an allocation, driven by the generic store kernel.
inline void views(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  constexpr std::size_t kViewOffset = 1017;  // elements: an odd offset, 8-byte aligned only
  const std::size_t total = kViewOffset + n * kCount + 100;
  aperture::Allocation whole = provider.allocate(total * sizeof(std::int64_t));
  if (job.direct.empty()) job.learn_direct(whole.map);
  unsigned long long* counter = nullptr;
  APERTURE_CUDA_CHECK(cudaMalloc(&counter, sizeof *counter), "test");
  APERTURE_CUDA_CHECK(cudaMemset(counter, 0, sizeof *counter), "test");
  std::int64_t* view = whole.as<std::int64_t>() + kViewOffset;
  const std::size_t view_bytes = n * kCount * sizeof(std::int64_t);
  const aperture::SymmetricAddressMap vmap = provider.symmetric_address_map(view, view_bytes);
  CHECK(vmap.local_rank == me && vmap.world_size == n);
  CHECK(vmap.allocation_base == reinterpret_cast<std::uintptr_t>(view));
  CHECK(vmap.allocation_bytes == view_bytes);
  const auto whole_host = whole.map.host_peer_bases();
  const auto view_host = vmap.host_peer_bases();
  for (int p = 0; p < n; ++p) {
    CHECK(vmap.is_direct(p) == whole.map.is_direct(p));
    if (whole.map.is_direct(p))
      CHECK(view_host[p] == whole_host[p] + static_cast<std::int64_t>(kViewOffset * sizeof(std::int64_t)));
  }
  CHECK(vmap.peer_bases() != whole.map.peer_bases());
  CHECK(device_of(vmap.peer_bases()) >= 0);
  const auto device_copy = gputest::to_host(vmap.peer_bases(), n);
  for (int p = 0; p < n; ++p) CHECK(device_copy[p] == view_host[p]);
  const auto past_end = error_of([&] { provider.symmetric_address_map(view, total * sizeof(std::int64_t)); });
  CHECK_MSG(past_end != "(no error)", "a range running past the allocation is refused: " + past_end);
  job.sync();

  store_through_view<<<kBlocks, kThreads>>>(view, me, n, vmap.peer_bases(), whole.map.peer_bases(), counter);
  gputest::launched("store_through_view");
  job.sync();
  CHECK(gputest::to_host(counter, 1)[0] == 0);  // view and whole tables agree
  const auto host = gputest::to_host(whole.as<std::int64_t>(), total);
  std::vector<std::int64_t> expected(total, 0);
  for (int s = 0; s < n; ++s)
    if (job.reaches(s, me))
      for (std::size_t i = 0; i < kCount; ++i) expected[kViewOffset + s * kCount + i] = pattern<std::int64_t>(s, i, 5);
  CHECK_RANGE(host.data(), expected, "view: whole[view offset + source slot] == pattern(source), 0 elsewhere");
  job.sync();
  APERTURE_CUDA_CHECK(cudaFree(counter), "test");
  provider.free(whole);
}

// Misuse is refused with a message that says what is wrong.
inline void bad_requests(gputest::Job& job) {
  auto& provider = *job.provider;
  auto a = provider.allocate(4096);
  auto copy = a;
  provider.free(a);
  // free marks the map freed for every copy: the checked path refuses the stale copy.
  CHECK(copy.map.freed());
  const auto stale = error_of([&] { aperture::checked_translate(copy.map, copy.as<char>(), job.me); });
  CHECK_MSG(contains(stale, "use after free"), stale);
  const auto twice = error_of([&] { provider.free(copy); });
  CHECK_MSG(contains(twice, "freed twice"), twice);
  void* foreign = nullptr;
  APERTURE_CUDA_CHECK(cudaMalloc(&foreign, 256), "test");
  aperture::Allocation stranger{foreign, 256, {}};
  const auto not_ours = error_of([&] { provider.free(stranger); });
  CHECK_MSG(contains(not_ours, "another provider"), not_ours);
  const auto not_ours_map = error_of([&] { provider.symmetric_address_map(foreign, 16); });
  CHECK_MSG(contains(not_ours_map, "another provider"), not_ours_map);
  APERTURE_CUDA_CHECK(cudaFree(foreign), "test");
  const auto odd = error_of([&] { provider.allocate(100, 3); });
  CHECK_MSG(contains(odd, "not a power of two"), odd);
  // A bad request on one rank fails every rank at once (compared before it is judged), no hang.
  if (job.n > 1) {
    const auto one_bad = error_of([&] { provider.allocate(100, job.me == job.n - 1 ? 3 : 256); });
    CHECK_MSG(contains(one_bad, "mismatch") && contains(one_bad, "alignment=3"), one_bad);
  }
  job.team.barrier();
}

}  // namespace foreign
