// src/collectives/device_kernels.cuh — the collectives' CUDA kernels and how they are launched,
// shared by device.cu (data movement, the entry points) and the device_reduce_*.cu files, which
// instantiate the reductions per element type in translation units of their own (so the two
// CI cores compile them side by side, and a change to one type group recompiles only it).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "aperture/collectives/all_gather.h"
#include "aperture/collectives/all_reduce.h"
#include "aperture/collectives/all_to_all.h"
#include "aperture/collectives/barrier.h"
#include "aperture/collectives/broadcast.h"
#include "aperture/collectives/detail/tuning.h"
#include "aperture/collectives/reduce_scatter.h"
#include "aperture/coop.h"
#include "aperture/error.h"
#include "dispatch.h"

namespace aperture::collectives::detail {

inline void check_cuda(cudaError_t status, const std::string& call) {
  if (status != cudaSuccess)
    throw Error(ErrorCode::system,
                "collectives: " + call + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")",
                call);
}

// Communicator::Options::block_threads may be anything up to this: every kernel must launch with
// that many threads, so the compiler keeps each within the registers the bound leaves.
constexpr int kMaxThreads = tuning::kDeviceThreads;

// Kernels are launched as programmatic dependents of whatever ran before them on the stream
// (launch() below): the next kernel may be scheduled while this one still runs, so a collective's
// launch latency hides behind the previous call instead of adding to it. Each kernel lets the
// next one launch at once, and waits for the previous grid to complete (and its memory to be
// visible, here and to peers) before it touches any memory: to the collectives it is as if the
// launches were ordinary, stream-ordered ones (the LL clears of detail/ll.h rely on that ordering).
__device__ inline void follow_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <class T>
__global__ void __launch_bounds__(kMaxThreads) broadcast_kernel(CollectiveHandle h, const T* in, T* out, std::uint64_t count, int root) {
  follow_previous_grid();
  broadcast(CoopBlock{}, h, in, out, count, root);
}
template <class T>
__global__ void __launch_bounds__(kMaxThreads) all_gather_kernel(CollectiveHandle h, const T* in, T* out, std::uint64_t count) {
  follow_previous_grid();
  all_gather(CoopBlock{}, h, in, out, count);
}
template <class T>
__global__ void __launch_bounds__(kMaxThreads) all_to_all_kernel(CollectiveHandle h, const T* in, T* out, std::uint64_t count) {
  follow_previous_grid();
  all_to_all(CoopBlock{}, h, in, out, count);
}
template <ReduceOp Op, class T>
__global__ void __launch_bounds__(kMaxThreads) reduce_scatter_kernel(CollectiveHandle h, const T* in, T* out, std::uint64_t count) {
  follow_previous_grid();
  reduce_scatter<Op>(CoopBlock{}, h, in, out, count);
}
template <class T>
__global__ void __launch_bounds__(kMaxThreads) all_gather_ll_kernel(CollectiveHandle h, const T* in, T* out, std::uint64_t count) {
  follow_previous_grid();
  all_gather_ll(CoopBlock{}, h, in, out, count);
}
template <ReduceOp Op, class T>
__global__ void __launch_bounds__(kMaxThreads) reduce_scatter_ll_kernel(CollectiveHandle h, const T* in, T* out, std::uint64_t count) {
  follow_previous_grid();
  reduce_scatter_ll<Op>(CoopBlock{}, h, in, out, count);
}
template <ReduceOp Op, class T>
__global__ void __launch_bounds__(kMaxThreads) all_reduce_ll_kernel(CollectiveHandle h, const T* in, T* out, std::uint64_t count) {
  follow_previous_grid();
  all_reduce_ll<Op>(CoopBlock{}, h, in, out, count);
}
template <class T>
__global__ void __launch_bounds__(kMaxThreads) all_gather_direct_kernel(CollectiveHandle h, const T* in, const std::int64_t* in_bases, T* out, std::uint64_t count) {
  follow_previous_grid();
  all_gather_direct(CoopBlock{}, h, in, in_bases, out, count);
}
template <ReduceOp Op, class T>
__global__ void __launch_bounds__(kMaxThreads) reduce_scatter_direct_kernel(CollectiveHandle h, const T* in, const std::int64_t* in_bases, T* out, std::uint64_t count) {
  follow_previous_grid();
  reduce_scatter_direct<Op>(CoopBlock{}, h, in, in_bases, out, count);
}
template <ReduceOp Op, class T>
__global__ void __launch_bounds__(kMaxThreads) all_reduce_direct_kernel(CollectiveHandle h, const T* in, const std::int64_t* in_bases, T* out, std::uint64_t count) {
  follow_previous_grid();
  all_reduce_direct<Op>(CoopBlock{}, h, in, in_bases, out, count);
}
template <ReduceOp Op, class T>
__global__ void __launch_bounds__(kMaxThreads) all_reduce_one_shot_kernel(CollectiveHandle h, const T* in, T* out, std::uint64_t count) {
  follow_previous_grid();
  all_reduce_one_shot<Op>(CoopBlock{}, h, in, out, count);
}
template <ReduceOp Op, class T>
__global__ void __launch_bounds__(kMaxThreads) all_reduce_two_shot_kernel(CollectiveHandle h, const T* in, T* out, std::uint64_t count) {
  follow_previous_grid();
  all_reduce_two_shot<Op>(CoopBlock{}, h, in, out, count);
}

struct Launch {
  dim3 grid;
  dim3 block;
  cudaStream_t stream;
};

// Programmatic dependent launch needs compute capability 9.0; APERTURE_COLLECTIVES_PDL=0 turns it
// off (ordinary launches; for comparing).
inline bool overlap_launches() {
  static const bool on = [] {
    const char* env = std::getenv("APERTURE_COLLECTIVES_PDL");
    if (env != nullptr && std::string(env) == "0") return false;
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major >= 9;
  }();
  return on;
}

template <class... Params, class... Args>
void launch(const Launch& l, void (*kernel)(Params...), Args... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = l.grid;
  config.blockDim = l.block;
  config.dynamicSmemBytes = 0;
  config.stream = l.stream;
  config.attrs = &attribute;
  // Not on the legacy default stream, whose implicit synchronisation with other streams is the
  // reason a caller uses it: there every launch stays an ordinary one.
  config.numAttrs = overlap_launches() && l.stream != nullptr && l.stream != cudaStreamLegacy ? 1 : 0;
  check_cuda(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...),
             "cudaLaunchKernelEx (" + std::to_string(l.grid.x) + " blocks of " + std::to_string(l.block.x) + " threads)");
}

// Launches the reduction `c` of element type T (any ReduceOp); defined in device_reduce.cuh and
// instantiated for every GPU element type by the device_reduce_*.cu files, nowhere else.
template <class T>
void launch_reduction(const Launch& l, const CollectiveHandle& h, const Call& c);

}  // namespace aperture::collectives::detail
