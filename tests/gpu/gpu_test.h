// tests/gpu/gpu_test.h — what every GPU test program shares.
//
// The GPU tests are plain programs (no GoogleTest: the GPU machine may not have it), run as
// ranks of a job: `aperture launch -n N -- gpu_rma_test`, or torchrun-style through RANK,
// WORLD_SIZE, MASTER_ADDR and MASTER_PORT. Each program:
//   - prints "SKIP: <reason>" and exits 77 when there is no GPU or the cuda-ipc provider cannot
//     run here (CTest's SKIP_RETURN_CODE shows it as skipped, not passed or failed);
//   - checks every element it wrote, on the host, after copying the GPU memory back, with
//     values distinct per rank and per element, so a wrong peer or offset shows;
//   - prints each failed check (the first few) with rank, file:line and values, then a summary
//     line "PASS <name>: N checks" or "FAIL <name>: M of N checks failed", and exits 0 or 1.
#pragma once

#include <cuda_runtime.h>

#include <aperture/aperture.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/provider_status.h"
#include "common/cuda_check.h"  // APERTURE_CUDA_CHECK: the library's own CUDA error translation

namespace gputest {

constexpr int kSkipStatus = 77;

// Counts checks and failures of this rank; prints the first failures as they happen.
struct Checker {
  int rank = 0;
  long long checks = 0;
  long long failures = 0;
  static constexpr long long kPrinted = 20;

  // Returns `ok`, so a caller can stop checking a buffer after its first bad element.
  bool check(bool ok, const char* what, const char* file, int line, const std::string& detail = {}) {
    ++checks;
    if (!ok && failures++ < kPrinted)
      std::fprintf(stderr, "rank %d: CHECK failed at %s:%d: %s %s\n", rank, file, line, what, detail.c_str());
    return ok;
  }
};

// Expect `got == expected` for every element, printing the first mismatch of the range.
template <class T>
bool check_range(Checker& c, const T* got, const std::vector<T>& expected, const char* what, const char* file,
                 int line) {
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (got[i] != expected[i]) {
      c.checks += static_cast<long long>(expected.size());
      c.check(false, what, file, line,
              "(element " + std::to_string(i) + " of " + std::to_string(expected.size()) + ": got " +
                  std::to_string(got[i]) + ", expected " + std::to_string(expected[i]) + ")");
      return false;
    }
  }
  c.checks += static_cast<long long>(expected.size());
  return true;
}

// The value rank `rank` writes at element `i` (salt: which buffer or round): distinct per rank
// and element, and exact in float (below 2^24) and in every integer type used here.
template <class T>
__host__ __device__ inline T pattern(int rank, std::size_t i, int salt = 0) {
  return static_cast<T>((rank + 1) * 1000000 + static_cast<long long>(i % 100000) * 8 + salt);
}

// One rank's view of the job.
struct Job {
  aperture::Team team;  // declared first: outlives the provider
  std::unique_ptr<aperture::Provider> provider;
  int me = 0;
  int n = 1;
  Checker checker;
  std::vector<std::vector<std::uint8_t>> direct;  // direct[s][p]: rank s reaches rank p directly

  // Whether `source` could write into `target`'s memory (so `target` must check what it wrote).
  bool reaches(int source, int target) const { return direct[source][target] != 0; }

  // Every rank's kernels are done and every rank got here.
  void sync() {
    APERTURE_CUDA_CHECK(cudaDeviceSynchronize(), "test");
    team.barrier();
  }

  // Learns, for every pair, whether the first reaches the second (collective).
  void learn_direct(const aperture::SymmetricAddressMap& map) {
    std::vector<std::uint8_t> mine(n);
    for (int p = 0; p < n; ++p) mine[p] = map.is_direct(p) ? 1 : 0;
    std::vector<std::uint8_t> all(static_cast<std::size_t>(n) * n);
    team.allgather(mine.data(), all.data(), n);
    direct.assign(n, std::vector<std::uint8_t>(n));
    for (int s = 0; s < n; ++s)
      for (int p = 0; p < n; ++p) direct[s][p] = all[static_cast<std::size_t>(s) * n + p];
  }
};

[[noreturn]] inline void skip(const std::string& why) {
  std::printf("SKIP: %s\n", why.c_str());
  std::fflush(stdout);
  std::exit(kSkipStatus);
}

// Skips (77) unless there is a GPU and every provider named is available here. Every rank of a
// machine makes the same decision.
inline void require(const char* program, std::initializer_list<const char*> providers) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0)
    skip(std::string(program) + ": no GPU here (" +
         (rc != cudaSuccess ? aperture::detail::cuda_error_text(rc) : std::string("cudaGetDeviceCount reported 0")) +
         ")");
  for (const char* name : providers) {
    const auto status = test::provider_status(name);
    if (!status) skip(std::string(program) + ": aperture does not know provider " + name);
    if (!status->available) skip(std::string(program) + ": provider " + name + " is not available: " + status->reason);
  }
}

// This rank's Job on the team the environment describes, before its provider is made. The Job
// lives on the heap: its provider keeps a reference to its Team, so the Job must never move.
inline std::unique_ptr<Job> join_team() {
  auto job = std::unique_ptr<Job>(new Job{aperture::Team::from_env(), nullptr});
  job->me = job->team.rank();
  job->n = job->team.size();
  job->checker.rank = job->me;
  return job;
}

// The GPU this rank uses now, for the line each program starts with.
struct CurrentDevice {
  int device = -1;
  cudaDeviceProp prop{};
};
inline CurrentDevice current_device() {
  CurrentDevice current;
  APERTURE_CUDA_CHECK(cudaGetDevice(&current.device), "test");
  APERTURE_CUDA_CHECK(cudaGetDeviceProperties(&current.prop, current.device), "test");
  return current;
}

// Starts the job on `provider` (an aperture heap: cuda-ipc or cuda-vmm), or prints "SKIP: ..."
// and exits 77 when it cannot run here.
inline std::unique_ptr<Job> start(const char* program, const char* provider = "cuda-ipc") {
  require(program, {provider});
  auto job = join_team();
  job->provider = aperture::make_provider(provider, job->team);
  const CurrentDevice gpu = current_device();
  std::printf("rank %d of %d: %s on %s, GPU %d (%s, %d SMs)\n", job->me, job->n, program, provider, gpu.device,
              gpu.prop.name, gpu.prop.multiProcessorCount);
  std::fflush(stdout);
  return job;
}

// The GPU that holds `p`, or -1 for memory that is not device memory (or no memory at all).
inline int device_of(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it, so later launch checks see their own
    return -1;
  }
  return attributes.type == cudaMemoryTypeDevice ? attributes.device : -1;
}

// The summary line every rank prints last; the exit status of main.
inline int finish(Job& job, const char* program) {
  // Every rank's failures count: a rank whose checks all passed still fails the job when a peer
  // saw its writes go wrong, and says so.
  const long long mine[2] = {job.checker.checks, job.checker.failures};
  std::vector<long long> all(2 * static_cast<std::size_t>(job.n));
  job.team.allgather(mine, all.data(), sizeof mine);
  long long failures = 0;
  for (int r = 0; r < job.n; ++r) failures += all[2 * r + 1];
  if (job.checker.failures == 0 && failures == 0) {
    std::printf("PASS %s (rank %d of %d): %lld checks\n", program, job.me, job.n, job.checker.checks);
    return 0;
  }
  std::printf("FAIL %s (rank %d of %d): %lld of %lld checks failed here, %lld on all ranks\n", program, job.me, job.n,
              job.checker.failures, job.checker.checks, failures);
  return 1;
}

// Runs `body` and turns any exception into a printed error and exit status 1.
template <class Body>
int run_main(const char* program, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL %s: %s\n", program, e.what());
    return 1;
  }
}

// A host copy of n elements of device memory.
template <class T>
std::vector<T> to_host(const T* device, std::size_t count) {
  std::vector<T> host(count);
  if (count != 0)
    APERTURE_CUDA_CHECK(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost), "test");
  return host;
}

// Launch check: the launch itself, then (when asked) the kernel's completion.
inline void launched(const char* kernel) {
  aperture::detail::check_cuda(cudaGetLastError(), kernel, __FILE__, __LINE__, "kernel launch");
}

}  // namespace gputest

#define CHECK(cond) job.checker.check((cond), #cond, __FILE__, __LINE__)
#define CHECK_MSG(cond, detail) job.checker.check((cond), #cond, __FILE__, __LINE__, (detail))
#define CHECK_RANGE(got, expected, what) \
  gputest::check_range(job.checker, (got), (expected), (what), __FILE__, __LINE__)
