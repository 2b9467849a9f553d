// tests/gpu/gpu_test.h — what every GPU test program of tests/gpu shares.
//
// The GPU tests are GoogleTest programs run as ranks of a job: `aperture launch -n N --
// gpu_rma_test`, or torchrun-style through RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT. Each
// program:
//   - prints "SKIP: <reason>" and exits 77 when there is no GPU or its provider cannot run here
//     (CTest's SKIP_RETURN_CODE shows it as skipped, not passed or failed);
//   - makes its one Job (team and provider) before the tests, which every rank runs in the same
//     order, so that the collective calls inside match;
//   - checks every element it wrote, on the host, after copying the GPU memory back, with
//     values distinct per rank and per element, so a wrong peer or offset shows; a failed check
//     is a GoogleTest failure naming file:line and the values (the launcher prefixes the rank).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

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

#include "../common/gpu_reach.h"
#include "../common/provider_status.h"
#include "common/cuda_check.h"  // APERTURE_CUDA_CHECK: the library's own CUDA error translation

namespace gputest {

constexpr int kSkipStatus = 77;

// A GoogleTest failure at file:line unless `ok`; returns `ok`, so a caller can stop early.
inline bool expect(bool ok, const char* what, const char* file, int line, const std::string& detail = {}) {
  if (!ok) ADD_FAILURE_AT(file, line) << what << " " << detail;
  return ok;
}

// Expect `got == expected` for every element; a failure names the first mismatch of the range.
template <class T>
bool check_range(const T* got, const std::vector<T>& expected, const char* what, const char* file, int line) {
  for (std::size_t i = 0; i < expected.size(); ++i)
    if (got[i] != expected[i])
      return expect(false, what, file, line,
                    "(element " + std::to_string(i) + " of " + std::to_string(expected.size()) + ": got " +
                        std::to_string(got[i]) + ", expected " + std::to_string(expected[i]) + ")");
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
  std::vector<std::vector<std::uint8_t>> direct;  // direct[s][p]: rank s reaches rank p directly

  // Whether `source` could write into `target`'s memory (so `target` must check what it wrote).
  bool reaches(int source, int target) const { return direct[source][target] != 0; }

  // Every rank's kernels are done and every rank got here.
  void sync() {
    APERTURE_CUDA_CHECK(cudaDeviceSynchronize(), "test");
    team.barrier();
  }

  // Learns, for every pair, whether the first reaches the second (collective), after checking
  // that this rank's view is the hardware's (test::expected_gpu_reach), not only the provider's:
  // a table of zeros would otherwise make every test check nothing and pass.
  void learn_direct(const aperture::SymmetricAddressMap& map) {
    std::vector<std::uint8_t> mine(n);
    for (int p = 0; p < n; ++p) mine[p] = map.is_direct(p) ? 1 : 0;
    const std::string differs = test::reach_mismatch(mine, test::expected_gpu_reach(team));
    if (!differs.empty()) ADD_FAILURE() << "rank " << me << ": the provider's direct peers are not the hardware's:" << differs;
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

// Skips (77) when there is no GPU. With a GPU, a provider named that is not available here is a
// failure (exit 1), not a skip: on a GPU machine "NVSHMEM not found" must not pass for a green
// run. APERTURE_TEST_ALLOW_UNAVAILABLE=1 makes it a skip again, for a GPU machine that lacks a
// library on purpose (scripts/gpu-check.sh never sets it). Every rank of a machine makes the
// same decision.
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
    if (!status->available) {
      const std::string why = std::string(program) + ": provider " + name + " is not available: " + status->reason;
      const char* allow = std::getenv("APERTURE_TEST_ALLOW_UNAVAILABLE");
      if (allow != nullptr && std::string(allow) == "1") skip(why);
      std::fprintf(stderr, "FAIL %s (there is a GPU here; APERTURE_TEST_ALLOW_UNAVAILABLE=1 would skip)\n", why.c_str());
      std::exit(1);
    }
  }
}

// This rank's Job on the team the environment describes, before its provider is made. The Job
// lives on the heap: its provider keeps a reference to its Team, so the Job must never move.
inline std::unique_ptr<Job> join_team() {
  auto job = std::unique_ptr<Job>(new Job{aperture::Team::from_env(), nullptr});
  job->me = job->team.rank();
  job->n = job->team.size();
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

namespace detail {
inline std::unique_ptr<Job>& the_job() {
  static std::unique_ptr<Job> job;
  return job;
}
}  // namespace detail

// The program's Job, made by run_tests before any test runs.
inline Job& job() { return *detail::the_job(); }

// main of a GPU test program: skips (77) unless `start` can make the Job here (it calls
// require(), which exits 77 with the reason), runs every test on it, and exits 77 when every
// test that ran was skipped.
template <class Start>
int run_tests(int argc, char** argv, const char* program, Start&& start) {
  ::testing::InitGoogleTest(&argc, argv);
  int result = 1;
  try {
    detail::the_job() = start();
    if (job().me != 0) ::testing::GTEST_FLAG(brief) = true;  // one full report is enough
    result = RUN_ALL_TESTS();
    job().sync();  // nobody tears down while a peer still runs
    const auto& unit = *::testing::UnitTest::GetInstance();
    if (result == 0 && unit.test_to_run_count() > 0 && unit.skipped_test_count() == unit.test_to_run_count()) {
      std::printf("SKIP: %s: all %d tests skipped here\n", program, unit.test_to_run_count());
      result = kSkipStatus;
    }
    detail::the_job().reset();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL %s: %s\n", program, e.what());
    return 1;
  }
  return result;
}

}  // namespace gputest

#define CHECK(cond) ::gputest::expect((cond), #cond, __FILE__, __LINE__)
#define CHECK_MSG(cond, detail) ::gputest::expect((cond), #cond, __FILE__, __LINE__, (detail))
#define CHECK_RANGE(got, expected, what) ::gputest::check_range((got), (expected), (what), __FILE__, __LINE__)
