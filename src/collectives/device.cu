// src/collectives/device.cu — the collectives as CUDA kernels: the same templates the CPU runs,
// with one CUDA block (aperture::CoopBlock) as the Coop and a grid of blocks splitting the data.
// Every kernel takes only the handle and the call's arguments by value; epochs live in device
// memory, so a launch may be captured in a CUDA graph and replayed.
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

namespace {

void check_cuda(cudaError_t status, const std::string& call) {
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

__global__ void __launch_bounds__(kMaxThreads) barrier_kernel(CollectiveHandle h) {
  follow_previous_grid();
  barrier(CoopBlock{}, h);
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
bool overlap_launches() {
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

template <ReduceOp Op, class T>
void launch_reduction(const Launch& l, const CollectiveHandle& h, const Call& c) {
  const auto* in = static_cast<const T*>(c.in);
  auto* out = static_cast<T*>(c.out);
  switch (c.kind) {
    case Kind::reduce_scatter:
      launch(l, reduce_scatter_kernel<Op, T>, h, in, out, c.count);
      break;
    case Kind::all_reduce_one_shot:
      launch(l, all_reduce_one_shot_kernel<Op, T>, h, in, out, c.count);
      break;
    case Kind::all_reduce_two_shot:
      launch(l, all_reduce_two_shot_kernel<Op, T>, h, in, out, c.count);
      break;
    case Kind::reduce_scatter_ll:
      launch(l, reduce_scatter_ll_kernel<Op, T>, h, in, out, c.count);
      break;
    case Kind::all_reduce_ll:
      launch(l, all_reduce_ll_kernel<Op, T>, h, in, out, c.count);
      break;
    case Kind::reduce_scatter_direct:
      launch(l, reduce_scatter_direct_kernel<Op, T>, h, in, c.in_bases, out, c.count);
      break;
    case Kind::all_reduce_direct:
      launch(l, all_reduce_direct_kernel<Op, T>, h, in, c.in_bases, out, c.count);
      break;
    default: throw Error(ErrorCode::internal, "collectives: internal: not a reduction");
  }
}

template <class T>
void launch_typed(const Launch& l, const CollectiveHandle& h, const Call& c) {
  const auto* in = static_cast<const T*>(c.in);
  auto* out = static_cast<T*>(c.out);
  switch (c.kind) {
    case Kind::broadcast: launch(l, broadcast_kernel<T>, h, in, out, c.count, c.root); return;
    case Kind::all_gather: launch(l, all_gather_kernel<T>, h, in, out, c.count); return;
    case Kind::all_gather_ll: launch(l, all_gather_ll_kernel<T>, h, in, out, c.count); return;
    case Kind::all_gather_direct: launch(l, all_gather_direct_kernel<T>, h, in, c.in_bases, out, c.count); return;
    case Kind::all_to_all: launch(l, all_to_all_kernel<T>, h, in, out, c.count); return;
    default: break;
  }
  switch (c.op) {
    case ReduceOp::sum: launch_reduction<ReduceOp::sum, T>(l, h, c); break;
    case ReduceOp::min: launch_reduction<ReduceOp::min, T>(l, h, c); break;
    case ReduceOp::max: launch_reduction<ReduceOp::max, T>(l, h, c); break;
  }
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::barrier: return "barrier";
    case Kind::broadcast: return "broadcast";
    case Kind::all_gather: return "all_gather";
    case Kind::reduce_scatter: return "reduce_scatter";
    case Kind::all_reduce_one_shot: return "all_reduce (one-shot)";
    case Kind::all_reduce_two_shot: return "all_reduce (two-shot)";
    case Kind::all_gather_ll: return "all_gather (ll)";
    case Kind::reduce_scatter_ll: return "reduce_scatter (ll)";
    case Kind::all_reduce_ll: return "all_reduce (ll)";
    case Kind::all_gather_direct: return "all_gather (direct)";
    case Kind::reduce_scatter_direct: return "reduce_scatter (direct)";
    case Kind::all_reduce_direct: return "all_reduce (direct)";
    default: return "all_to_all";
  }
}

}  // namespace

bool device_support_compiled() { return true; }

int device_select(const void* ptr) {
  cudaPointerAttributes attributes{};
  check_cuda(cudaPointerGetAttributes(&attributes, ptr), "cudaPointerGetAttributes(scratch)");
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)
    throw Error(ErrorCode::internal, "collectives: the provider said its memory is on the GPU, but cudaPointerGetAttributes says the "
                "scratch is not device memory (type " + std::to_string(static_cast<int>(attributes.type)) + ")");
  check_cuda(cudaSetDevice(attributes.device), "cudaSetDevice");
  int sms = 0;
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, attributes.device),
             "cudaDeviceGetAttribute(MultiProcessorCount)");
  return sms;
}

void device_zero(void* base, std::uint64_t bytes) {
  check_cuda(cudaMemset(base, 0, bytes), "cudaMemset(collective flags)");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after zeroing the collective flags");
}

void device_launch(const CollectiveHandle& h, const Call& c, int parts, int threads, void* stream) {
  const Launch l{dim3(static_cast<unsigned>(parts)), dim3(static_cast<unsigned>(threads)),
                 static_cast<cudaStream_t>(stream)};
  if (c.kind == Kind::barrier) {
    launch(l, barrier_kernel, h);
  } else {
    switch (c.type) {
      case DataType::float32: launch_typed<float>(l, h, c); break;
      case DataType::int32: launch_typed<std::int32_t>(l, h, c); break;
      case DataType::float16: launch_typed<__half>(l, h, c); break;
      case DataType::bfloat16: launch_typed<__nv_bfloat16>(l, h, c); break;
      default: throw Error(ErrorCode::invalid_argument, std::string("collectives: ") + name_of(c.type) + " is not compiled for GPUs");
    }
  }
  check_cuda(cudaGetLastError(), std::string("launching the ") + kind_name(c.kind) + " kernel (" +
                                     std::to_string(parts) + " blocks of " + std::to_string(threads) + " threads)");
}

bool device_status_ok(const CollectiveHandle& h, void* stream) {
  check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
  std::uint64_t status = 0;
  check_cuda(cudaMemcpy(&status, h.status, sizeof status, cudaMemcpyDeviceToHost), "cudaMemcpy(status)");
  return status == 0;
}

void device_synchronize() { check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

void device_check_pointer(const char* call, const char* what, const void* ptr, void* stream) {
  if (ptr == nullptr) return;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &capture) != cudaSuccess) {
    cudaGetLastError();
    return;  // the launch will say what is wrong with the stream
  }
  if (capture != cudaStreamCaptureStatusNone) return;
  cudaPointerAttributes attributes{};
  const cudaError_t status = cudaPointerGetAttributes(&attributes, ptr);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear it
    throw Error(ErrorCode::system, std::string("Communicator::") + call + ": cudaPointerGetAttributes(" + what + ") failed: " +
                cudaGetErrorString(status));
  }
  const bool reachable = attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged ||
                         (attributes.type == cudaMemoryTypeHost && attributes.devicePointer != nullptr);
  if (!reachable)
    throw Error(ErrorCode::invalid_argument, std::string("Communicator::") + call + ": `" + what +
                "` is ordinary host memory, which a GPU kernel cannot read; on GPU memory give device memory "
                "(cudaMalloc, or an allocation of any provider) or pinned, mapped host memory");
}

}  // namespace aperture::collectives::detail
