// tests/gpu/gpu_checked_test.cu — APERTURE_CHECKED inside kernels: every bad access of
// tests/faults/checked_cases.h prints "aperture checked: <reason>" and traps before it touches
// memory, and correct code runs unchanged. Built with APERTURE_CHECKED=1.
//
//     gpu_checked_test              GoogleTest: runs the good operations here, then each bad case
//                                   (GpuChecked/BadAccess.TrapsAndSaysWhy/<N>) in a child process
//                                   of its own (a trap ends the CUDA context) and checks that the
//                                   child's kernel failed and printed the reason
//     gpu_checked_test --case N     one bad case (what the parent starts; no GoogleTest)
//
// Single process, one GPU: the three "ranks" are three cudaMalloc buffers of this GPU, which is
// all translation needs. One more case allocates from the cuda-ipc provider and overruns the
// allocation through map.peer_view(), whose length the checks take from the map.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../faults/checked_cases.h"
#include "gpu_test.h"

namespace {

using checked_cases::kSlots;
using checked_cases::kWorld;

constexpr int kProviderCase = checked_cases::kCaseCount;  // the case after the catalogue
constexpr int kNoTrapStatus = 4;                           // a child whose kernel was not stopped

std::int64_t initial(int rank, std::size_t i) { return 100000 * (rank + 1) + static_cast<std::int64_t>(i); }

// Three ranks' copies on this GPU, rank 2 not direct, and the table in device memory.
struct DeviceWorld {
  std::int64_t* copies[kWorld] = {};
  std::int64_t* local = nullptr;
  std::int64_t* table = nullptr;

  DeviceWorld() {
    std::vector<std::int64_t> bases(kWorld);
    for (int r = 0; r < kWorld; ++r) {
      APERTURE_CUDA_CHECK(cudaMalloc(&copies[r], checked_cases::kExtent), "test");
      std::vector<std::int64_t> values(kSlots);
      for (std::size_t i = 0; i < kSlots; ++i) values[i] = initial(r, i);
      APERTURE_CUDA_CHECK(cudaMemcpy(copies[r], values.data(), checked_cases::kExtent, cudaMemcpyHostToDevice), "test");
      bases[r] = r == checked_cases::kIndirect ? 0 : reinterpret_cast<std::int64_t>(copies[r]);
    }
    APERTURE_CUDA_CHECK(cudaMalloc(&local, checked_cases::kExtent), "test");
    APERTURE_CUDA_CHECK(cudaMemset(local, 0xff, checked_cases::kExtent), "test");
    APERTURE_CUDA_CHECK(cudaMalloc(&table, kWorld * sizeof(std::int64_t)), "test");
    APERTURE_CUDA_CHECK(cudaMemcpy(table, bases.data(), kWorld * sizeof(std::int64_t), cudaMemcpyHostToDevice), "test");
  }
  aperture::PeerView view() const { return {checked_cases::kMe, kWorld, table, checked_cases::kExtent}; }
};

__global__ void bad_case_kernel(int id, aperture::PeerView view, std::int64_t* mine, std::int64_t* local) {
  checked_cases::run_bad_case(id, view, mine, local);
}

__global__ void good_ops_kernel(aperture::PeerView view, std::int64_t* mine, std::int64_t* local) {
  checked_cases::run_good_ops(view, mine, local);
}

__global__ void overrun_kernel(aperture::PeerView view, std::int64_t* allocation, std::size_t slots) {
  view.store(allocation + slots, std::int64_t{1}, view.rank);  // one past the last slot
}

// The child: one bad case. Exit 0 is never expected: the kernel must fail.
int run_child(int id) {
  cudaError_t outcome = cudaSuccess;
  if (id == kProviderCase) {
    aperture::Team team = aperture::Team::single();  // also when the parent runs as a rank of a job
    auto provider = aperture::make_provider("cuda-ipc", team);
    const std::size_t slots = 1000;
    aperture::Allocation a = provider->allocate(slots * sizeof(std::int64_t));
    overrun_kernel<<<1, 1>>>(a.map.peer_view(), a.as<std::int64_t>(), slots);
    outcome = cudaDeviceSynchronize();
    std::printf("child: provider case: %s\n", aperture::detail::cuda_error_text(outcome).c_str());
    std::fflush(stdout);
    std::_Exit(outcome == cudaSuccess ? kNoTrapStatus : 3);  // a trapped context cannot free cleanly
  }
  DeviceWorld w;
  bad_case_kernel<<<1, 1>>>(id, w.view(), w.copies[checked_cases::kMe], w.local);
  outcome = cudaDeviceSynchronize();
  std::printf("child: case %d: %s\n", id, aperture::detail::cuda_error_text(outcome).c_str());
  std::fflush(stdout);
  std::_Exit(outcome == cudaSuccess ? kNoTrapStatus : 3);
}

// Runs `self --case id`, returns its exit status and everything it printed.
int run_case_process(int id, std::string& output) {
  const std::string command = "/proc/" + std::to_string(::getpid()) + "/exe --case " + std::to_string(id) + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(GpuChecked, CorrectCodeRunsUnchanged) {
  // Correct code, checked, changes what it should and nothing else.
  DeviceWorld w;
  good_ops_kernel<<<1, 1>>>(w.view(), w.copies[checked_cases::kMe], w.local);
  gputest::launched("good_ops_kernel");
  APERTURE_CUDA_CHECK(cudaDeviceSynchronize(), "good_ops_kernel");
  for (int r = 0; r < kWorld; ++r) {
    const std::vector<std::int64_t> got = gputest::to_host(w.copies[r], kSlots);
    std::vector<std::int64_t> expected(kSlots);
    for (std::size_t i = 0; i < kSlots; ++i) expected[i] = r == 1 ? checked_cases::good_value(i) : initial(r, i);
    CHECK_RANGE(got.data(), expected, ("copy of rank " + std::to_string(r)).c_str());
  }
  const std::vector<std::int64_t> local = gputest::to_host(w.local, kSlots);
  for (std::size_t i = 80; i < kSlots; ++i)
    EXPECT_EQ(local[i], initial(1, i)) << "get through a checked view, element " << i;
}

// Each bad case in a child process: its kernel printed the reason and trapped.
class BadAccess : public ::testing::TestWithParam<int> {};

TEST_P(BadAccess, TrapsAndSaysWhy) {
  const int id = GetParam();
  const char* name =
      id == kProviderCase ? "store one past a cuda-ipc allocation (map.peer_view())" : checked_cases::kCases[id].name;
  const char* reason = id == kProviderCase ? "runs past the end of the allocation" : checked_cases::kCases[id].reason;
  std::string output;
  const int status = run_case_process(id, output);
  const auto report = output.find("aperture checked: ");
  const bool reported = report != std::string::npos &&
                        output.substr(report, output.find('\n', report) - report).find(reason) != std::string::npos;
  const bool failed = output.find("child: ") != std::string::npos && status == 3;
  std::printf("  %-58s %s\n", name, reported && failed ? "trapped, reported" : "NOT STOPPED AS EXPECTED");
  EXPECT_TRUE(reported) << "the kernel printed the reason: " << name << ": " << output;
  EXPECT_TRUE(failed) << "the launch failed (trap) and the child said so: " << name << ": exit " << status << ": "
                      << output;
}

INSTANTIATE_TEST_SUITE_P(GpuChecked, BadAccess, ::testing::Range(0, kProviderCase + 1));

}  // namespace

int main(int argc, char** argv) {
  try {
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess || count == 0) {
      std::printf("SKIP: gpu_checked_test: no GPU here (%s)\n",
                  rc != cudaSuccess ? aperture::detail::cuda_error_text(rc).c_str() : "cudaGetDeviceCount reported 0");
      return gputest::kSkipStatus;
    }
    if (argc == 3 && std::string(argv[1]) == "--case") return run_child(std::atoi(argv[2]));
    ::testing::InitGoogleTest(&argc, argv);
    std::printf("gpu_checked_test: %d bad cases + 1 on the cuda-ipc provider, each in its own process\n",
                checked_cases::kCaseCount);
    return RUN_ALL_TESTS();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL gpu_checked_test: %s\n", e.what());
    return 1;
  }
}
