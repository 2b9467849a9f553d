// bench/device/bench_device.h — what the GPU measurements share: the timing of captured calls
// (bench_device.cu) and the overlapped-GEMM measurements (bench_gemm.cu).
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

#include "bench.h"

namespace aperture::bench {

// "bench: <call> failed: <status>", through the library's own error translation.
void check_cuda(cudaError_t status, const char* call);

// `call` captured into one CUDA graph as many times as fill about half a millisecond (1 to 64),
// the graph launched back to back by time_calls; the figure is per call.
Timed time_captured(Team& team, const BenchOptions& options, cudaStream_t stream, const std::function<void()>& call);

// The ops "ag_gemm" and "gemm_rs" (bench_gemm.cu): aperture::OverlappedGemm at the Llama-3-70B
// MLP shapes against cuBLASLt + NCCL, serial and on two streams; `nccl` is an ncclComm_t, or
// null when the bench was built without NCCL.
std::vector<BenchRow> bench_overlapped_gemm(Team& team, Provider& provider, const BenchOptions& options,
                                            const std::string& op, cudaStream_t stream, void* nccl);

}  // namespace aperture::bench
