// src/collectives/device.cu — the collectives as CUDA kernels: the same templates the CPU runs
// (run_collective.h), with one CUDA block (aperture::CoopBlock) as the Coop and a grid of blocks
// splitting the data. The kernel and its launch are device_kernels.cuh; the reductions are
// instantiated in device_reduce_<type>.cu, one file per element type that
// src/collectives/CMakeLists.txt generates.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/cuda_check.h"
#include "device_kernels.cuh"

namespace aperture::collectives::detail {

bool device_support_compiled() { return true; }

int device_select(const void* ptr) {
  cudaPointerAttributes attributes{};
  APERTURE_CUDA_CHECK(cudaPointerGetAttributes(&attributes, ptr), "collectives: the scratch");
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)
    throw Error(ErrorCode::internal, "collectives: the provider said its memory is on the GPU, but cudaPointerGetAttributes says the "
                "scratch is not device memory (type " + std::to_string(static_cast<int>(attributes.type)) + ")");
  APERTURE_CUDA_CHECK(cudaSetDevice(attributes.device), "collectives");
  int sms = 0;
  APERTURE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, attributes.device), "collectives");
  return sms;
}

void device_zero(void* base, std::uint64_t bytes) {
  APERTURE_CUDA_CHECK(cudaMemset(base, 0, bytes), "collectives: zeroing the flags");
  APERTURE_CUDA_CHECK(cudaDeviceSynchronize(), "collectives: zeroing the flags");
}

void device_launch(const CollectiveHandle& h, const Call& c, int parts, int threads, void* stream) {
  const Launch l{dim3(static_cast<unsigned>(parts)), dim3(static_cast<unsigned>(threads)),
                 static_cast<cudaStream_t>(stream)};
  dispatch_call(
      c, [&]<Kind K, class W>() { launch<K, ReduceOp::sum, W>(l, h, c); },
      [&]<DataType D>() { launch_reduction<CudaType<D>>(l, h, c); });
}

void device_copy(void* out, const void* in, std::uint64_t bytes, void* stream) {
  APERTURE_CUDA_CHECK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)),
                      "collectives: a one-rank collective's copy");
}

void device_read_status(const CollectiveHandle& h, void* stream, std::uint64_t* words) {
  APERTURE_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "collectives: reading the status");
  APERTURE_CUDA_CHECK(cudaMemcpy(words, h.status, kStatusWords * sizeof(std::uint64_t), cudaMemcpyDeviceToHost),
                      "collectives: reading the status");
}

void device_synchronize() { APERTURE_CUDA_CHECK(cudaDeviceSynchronize(), "collectives"); }

void device_check_pointer(const char* call, const char* what, const void* ptr, void* stream) {
  if (ptr == nullptr) return;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  // A stream that cannot say: the launch will say what is wrong with it.
  if (!APERTURE_CUDA_TRY(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &capture)).empty()) return;
  if (capture != cudaStreamCaptureStatusNone) return;
  cudaPointerAttributes attributes{};
  APERTURE_CUDA_CHECK(cudaPointerGetAttributes(&attributes, ptr),
                      std::string("Communicator::") + call + " (`" + what + "`)");
  const bool reachable = attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged ||
                         (attributes.type == cudaMemoryTypeHost && attributes.devicePointer != nullptr);
  if (!reachable)
    throw Error(ErrorCode::invalid_argument, std::string("Communicator::") + call + ": `" + what +
                "` is ordinary host memory, which a GPU kernel cannot read; on GPU memory give device memory "
                "(cudaMalloc, or an allocation of any provider) or pinned, mapped host memory");
}

}  // namespace aperture::collectives::detail
