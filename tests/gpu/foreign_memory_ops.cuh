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

#include "../common/error_of.h"
#include "gpu_test.h"
#include "misuse_checks.h"
#include "peer_kernels.cuh"
#include "provider_checks.h"

namespace foreign {

using gputest::device_of;
using gputest::pattern;
using gputest::thread_index;

constexpr std::size_t kCount = std::size_t{1} << 13;  // elements per slot
constexpr int kBlocks = 32;
constexpr int kThreads = 256;
constexpr gputest::RmaShape kShape{kCount, kBlocks, kThreads};
constexpr std::uint64_t kWaitTimeoutNs = 30'000'000'000ull;

// Starts the job on `provider` (skipping where it cannot run). No other provider is made.
inline std::unique_ptr<gputest::Job> start(const char* program, const char* provider) {
  gputest::require(program, {provider});
  auto job = gputest::join_team();
  int count = 0;
  APERTURE_CUDA_CHECK(cudaGetDeviceCount(&count), "test");
  if (job->team.local_size() > count)  // every rank of this machine sees the same and skips
    gputest::skip(std::string(program) + ": " + std::to_string(job->team.local_size()) + " ranks on this machine but " +
                  std::to_string(count) + " GPU(s); " + provider + " needs one GPU per rank");
  job->provider = aperture::make_provider(provider, job->team);
  const gputest::CurrentDevice gpu = gputest::current_device();
  std::printf("rank %d of %d: %s on %s memory, GPU %d (%s); no aperture heap in this process\n", job->me, job->n,
              program, provider, gpu.device, gpu.prop.name);
  std::fflush(stdout);
  return job;
}

// ---- the kernels: written once, for any provider's table (the generic ones: peer_kernels.cuh) ------

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

// ---- the checks ------------------------------------------------------------------------------------

// The provider's identity, its tables (host and device copies agree, device table on this
// rank's GPU), direct same-machine peers, and zeroed fresh memory.
inline void identity_and_tables(gputest::Job& job, const char* name, bool linear) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  gputest::check_identity(job, name, linear);
  aperture::Allocation a = provider.allocate(4096 * sizeof(std::int64_t));
  aperture::Allocation b = provider.allocate(1000);
  if (job.direct.empty()) job.learn_direct(a.map);
  for (const aperture::Allocation* x : {&a, &b}) {
    gputest::check_table(job, *x);
    for (int p = 0; p < n; ++p)
      if (p != me && x->map.is_direct(p)) CHECK(x->map.host_peer_bases()[p] != x->map.host_peer_bases()[me]);
  }
  gputest::check_peers_and_zeroed(job, a);
  job.sync();
  provider.free(b);
  provider.free(a);
  CHECK(a.ptr == nullptr && !a.map.has_table());
}

// store, load, put, get and copy against every direct peer; allocate() zeroes foreign memory.
template <class T>
void rma(gputest::Job& job) {
  gputest::rma_with_every_peer<T>(job, kShape, gputest::Fresh::zeroed);
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
  const int n = job.n;
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
  const auto past_end = test::error_of([&] { provider.symmetric_address_map(view, total * sizeof(std::int64_t)); });
  CHECK_MSG(past_end != "(no error)", "a range running past the allocation is refused: " + past_end);
  gputest::check_view(job, whole, total, kViewOffset, vmap, kShape, counter);
  job.sync();
  APERTURE_CUDA_CHECK(cudaFree(counter), "test");
  provider.free(whole);
}

// Misuse is refused with a message that says what is wrong.
inline void bad_requests(gputest::Job& job) {
  auto& provider = *job.provider;
  auto a = provider.allocate(4096);
  gputest::free_and_check_stale_copy(job, provider, a);
  gputest::check_foreign_memory_refused(job, provider);
  gputest::check_bad_alignment_refused(job, provider);
  job.team.barrier();
}

// aperture's status line for `name`: compiled in, available, and naming the library's version.
inline void status_line(gputest::Job& job, const char* name, const char* version) {
  const auto s = test::provider_status(name);
  CHECK(s && s->compiled_in && s->available);
  if (!s) return;
  CHECK_MSG(test::contains(s->reason, version), s->reason);
  if (job.me == 0) std::printf("aperture info: %s: %s\n", name, s->reason.c_str());
}

// Every device operation on the provider's memory, through the kernels written for any table.
inline void every_operation(gputest::Job& job, const char* name, bool linear) {
  identity_and_tables(job, name, linear);
  rma<std::int32_t>(job);
  rma<std::int64_t>(job);
  rma<float>(job);
  rma<double>(job);
  atomics(job);
  signals(job);
  views(job);
}

}  // namespace foreign
