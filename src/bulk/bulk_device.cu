// src/bulk/bulk_device.cu — aperture/bulk.h on the GPU: the copy engine (cudaMemcpyAsync on the
// translated pointers) or the SM copy kernel below, enqueued on the caller's stream.
//
// The SM copy moves the widest vector both pointers allow: w = the largest of 16, 8, 4, 2, 1
// bytes that divides dst - src, so that after a head of fewer than w bytes (up to dst's next
// w-byte boundary) both are w-aligned. Head and tail go byte by byte, the body in w-byte
// vectors, four in flight per thread (loads before stores), over a grid sized to the vectors.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "bulk/bulk_device.h"
#include "common/cuda_check.h"

namespace aperture::detail {
namespace {

constexpr int kThreads = 512;
constexpr int kInFlight = 4;       // vectors a thread loads before it stores them
constexpr int kBlocksPerSm = 4;    // the grid at the most: enough resident threads to fill HBM and NVLink

template <class V>
__global__ void __launch_bounds__(kThreads) sm_copy_kernel(unsigned char* dst, const unsigned char* src,
                                                           std::size_t head, std::size_t vectors, std::size_t tail) {
  const std::size_t thread = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  if (thread < head) dst[thread] = src[thread];
  V* const to = reinterpret_cast<V*>(dst + head);
  const V* const from = reinterpret_cast<const V*>(src + head);
  std::size_t i = thread;
  for (; i + (kInFlight - 1) * threads < vectors; i += kInFlight * threads) {
    V v[kInFlight];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) v[k] = from[i + k * threads];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) to[i + k * threads] = v[k];
  }
  for (; i < vectors; i += threads) to[i] = from[i];
  const std::size_t body_end = head + vectors * sizeof(V);
  if (thread < tail) dst[body_end + thread] = src[body_end + thread];
}

template <class V>
void launch_sm_copy(unsigned char* dst, const unsigned char* src, std::size_t bytes, cudaStream_t stream,
                    const char* call) {
  const auto misalignment = reinterpret_cast<std::uintptr_t>(dst) % sizeof(V);
  const std::size_t head = std::min<std::size_t>(bytes, misalignment == 0 ? 0 : sizeof(V) - misalignment);
  const std::size_t vectors = (bytes - head) / sizeof(V);
  const std::size_t tail = bytes - head - vectors * sizeof(V);
  int device = 0, sms = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice", __FILE__, __LINE__, call);
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute", __FILE__,
             __LINE__, call);
  const std::size_t wanted = std::max<std::size_t>({vectors, head, tail, 1});
  const std::size_t blocks = std::min<std::size_t>((wanted + kThreads - 1) / kThreads,
                                                   static_cast<std::size_t>(std::max(sms, 1)) * kBlocksPerSm);
  sm_copy_kernel<V><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(dst, src, head, vectors, tail);
  check_cuda(cudaGetLastError(), "sm_copy_kernel<<<...>>>", __FILE__, __LINE__, call);
}

}  // namespace

void bulk_device_transfer(void* dst, const void* src, std::size_t bytes, BulkPath path, BulkStream stream,
                          const char* call) {
  auto* const s = static_cast<cudaStream_t>(stream);
  if (path == BulkPath::copy_engine) {
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), "cudaMemcpyAsync", __FILE__, __LINE__, call);
    return;
  }
  auto* const to = static_cast<unsigned char*>(dst);
  const auto* const from = static_cast<const unsigned char*>(src);
  const auto apart = reinterpret_cast<std::uintptr_t>(to) - reinterpret_cast<std::uintptr_t>(from);
  if (apart % 16 == 0) return launch_sm_copy<uint4>(to, from, bytes, s, call);
  if (apart % 8 == 0) return launch_sm_copy<uint2>(to, from, bytes, s, call);
  if (apart % 4 == 0) return launch_sm_copy<unsigned>(to, from, bytes, s, call);
  if (apart % 2 == 0) return launch_sm_copy<unsigned short>(to, from, bytes, s, call);
  launch_sm_copy<unsigned char>(to, from, bytes, s, call);
}

}  // namespace aperture::detail
