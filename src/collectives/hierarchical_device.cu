// src/collectives/hierarchical_device.cu — the GPU memory a team across nodes stages through
// (hierarchical.h): device buffers for the node's phases, pinned host memory for MPI, and the
// node's kernels' cancel word (pinned and mapped: the host stores into it while they run).
#include <cuda_runtime.h>

#include <string>

#include "aperture/error.h"
#include "hierarchical.h"

namespace aperture::collectives::detail {

namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(ErrorCode::internal, std::string("Communicator (across nodes): ") + what + ": " + cudaGetErrorString(e));
}
}  // namespace

void* device_alloc(std::size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc (staging)");
  return p;
}
void device_free(void* p) { cudaFree(p); }
void* pinned_alloc(std::size_t bytes) {
  void* p = nullptr;
  check(cudaHostAlloc(&p, bytes, cudaHostAllocPortable), "cudaHostAlloc (pinned staging)");
  return p;
}
void pinned_free(void* p) { cudaFreeHost(p); }
bool device_stream_idle(void* stream) {
  const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream));
  if (e == cudaErrorNotReady) return false;
  check(e, "cudaStreamQuery");
  return true;
}
bool device_stream_capturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status), "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
}
std::uint64_t* cancel_word_alloc(const std::uint64_t** device) {
  void* word = nullptr;
  check(cudaHostAlloc(&word, sizeof(std::uint64_t), cudaHostAllocMapped | cudaHostAllocPortable),
        "cudaHostAlloc (the kernels' cancel word)");
  *static_cast<std::uint64_t*>(word) = 0;
  void* seen = nullptr;
  if (const cudaError_t e = cudaHostGetDevicePointer(&seen, word, 0); e != cudaSuccess) {
    cudaFreeHost(word);
    check(e, "cudaHostGetDevicePointer (the kernels' cancel word)");
  }
  *device = static_cast<const std::uint64_t*>(seen);
  return static_cast<std::uint64_t*>(word);
}
void cancel_word_free(std::uint64_t* word) { cudaFreeHost(word); }
void device_quiesce() { cudaDeviceSynchronize(); }
void device_table(std::int64_t** table, const std::int64_t* host, std::size_t entries) {
  *table = static_cast<std::int64_t*>(device_alloc(entries * sizeof(std::int64_t)));
  check(cudaMemcpy(*table, host, entries * sizeof(std::int64_t), cudaMemcpyHostToDevice), "cudaMemcpy (the node's table)");
}

}  // namespace aperture::collectives::detail
