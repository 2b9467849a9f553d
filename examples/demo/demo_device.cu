// examples/demo/demo_device.cu — the demo's ranks on GPU memory: one CUDA block per rank runs the ring
// and the all-reduce from demo_algorithm.h, the same code the CPU path runs.
#include <cuda_runtime.h>

#include <chrono>
#include <string>

#include "demo_algorithm.h"
#include "demo_device.h"

#include "aperture/coop.h"
#include "aperture/detail/host_wait.h"
#include "aperture/error.h"

namespace aperture::demo {

namespace {

constexpr int kThreads = 1024;

__global__ void prepare_kernel(PeerView peers, demo::Buffers buffers) {
  demo::prepare(CoopBlock{}, peers, buffers);
}

__global__ void ring_kernel(PeerView peers, demo::Buffers buffers, demo::Check* check, std::uint64_t timeout_ns,
                            int round) {
  if (!demo::ring(CoopBlock{}, peers, buffers, check, round, timeout_ns) && threadIdx.x == 0) check->timed_out = 1;
}

__global__ void all_reduce_kernel(PeerView peers, demo::Buffers buffers, demo::Check* check, std::uint64_t timeout_ns,
                                  int round) {
  if (!demo::all_reduce(CoopBlock{}, peers, buffers, check, round, timeout_ns) && threadIdx.x == 0)
    check->timed_out = 1;
}

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw Error(ErrorCode::system,
                std::string("demo: ") + call + " failed: " + cudaGetErrorName(status) + " (" +
                    cudaGetErrorString(status) + ")",
                call);
}

using Clock = std::chrono::steady_clock;

}  // namespace

DemoRankResult run_on_device(Team& team, const PeerView& peers, const demo::Buffers& buffers) {
  // Run where the memory is, whichever device the provider chose (and even if it set it through
  // another copy of the CUDA runtime).
  cudaPointerAttributes attributes{};
  check_cuda(cudaPointerGetAttributes(&attributes, buffers.send), "cudaPointerGetAttributes(buffer)");
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)
    throw Error(ErrorCode::internal,
                "demo: the provider said its memory is on the GPU, but cudaPointerGetAttributes says the buffer is not "
                "device memory (type " + std::to_string(static_cast<int>(attributes.type)) + ")");
  check_cuda(cudaSetDevice(attributes.device), "cudaSetDevice");

  DemoRankResult result;
  demo::Check* check = nullptr;
  check_cuda(cudaMalloc(&check, sizeof *check), "cudaMalloc(check)");
  try {
    check_cuda(cudaMemcpy(check, &result.check, sizeof *check, cudaMemcpyHostToDevice), "cudaMemcpy(check)");
    const std::uint64_t timeout_ns = detail::host_timeout_ns();

    prepare_kernel<<<1, kThreads>>>(peers, buffers);
    check_cuda(cudaGetLastError(), "prepare_kernel launch");
    check_cuda(cudaDeviceSynchronize(), "prepare_kernel");
    team.barrier();  // every rank's flags are zero before anyone signals

    const auto run_ring = [&](int round) {
      ring_kernel<<<1, kThreads>>>(peers, buffers, check, timeout_ns, round);
      check_cuda(cudaGetLastError(), "ring_kernel launch");
      check_cuda(cudaDeviceSynchronize(), "ring_kernel");
    };
    const auto run_all_reduce = [&](int round) {
      all_reduce_kernel<<<1, kThreads>>>(peers, buffers, check, timeout_ns, round);
      check_cuda(cudaGetLastError(), "all_reduce_kernel launch");
      check_cuda(cudaDeviceSynchronize(), "all_reduce_kernel");
    };
    // Round 1 warms up (first launches, first touches); round 2 is timed. Both are checked.
    run_ring(1);
    run_all_reduce(1);
    team.barrier();
    auto start = Clock::now();
    run_ring(2);
    result.ring_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    team.barrier();
    start = Clock::now();
    run_all_reduce(2);
    result.all_reduce_seconds = std::chrono::duration<double>(Clock::now() - start).count();

    check_cuda(cudaMemcpy(&result.check, check, sizeof *check, cudaMemcpyDeviceToHost), "cudaMemcpy(check back)");
  } catch (...) {
    cudaFree(check);
    throw;
  }
  cudaFree(check);
  return result;
}

}  // namespace aperture::demo
