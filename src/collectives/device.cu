// src/collectives/device.cu — the collectives as CUDA kernels: the same templates the CPU runs,
// with one CUDA block (aperture::CoopBlock) as the Coop and a grid of blocks splitting the data.
// Every kernel takes only the handle and the call's arguments by value; epochs live in device
// memory, so a launch may be captured in a CUDA graph and replayed. The kernels and the launch
// are device_kernels.cuh; the reductions are instantiated in device_reduce_<type>.cu, one file
// per element type that src/collectives/CMakeLists.txt generates.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "device_kernels.cuh"

namespace aperture::collectives::detail {

namespace {

__global__ void __launch_bounds__(kMaxThreads) barrier_kernel(CollectiveHandle h) {
  follow_previous_grid();
  barrier(CoopBlock{}, h);
}

// Moving data depends on the element's size only: one instantiation per size.
template <class T>
void launch_movement(const Launch& l, const CollectiveHandle& h, const Call& c) {
  const auto* in = static_cast<const T*>(c.in);
  auto* out = static_cast<T*>(c.out);
  switch (c.kind) {
    case Kind::broadcast: launch(l, broadcast_kernel<T>, h, in, out, c.count, c.root); return;
    case Kind::all_gather: launch(l, all_gather_kernel<T>, h, in, out, c.count); return;
    case Kind::all_gather_ll: launch(l, all_gather_ll_kernel<T>, h, in, out, c.count); return;
    case Kind::all_gather_direct: launch(l, all_gather_direct_kernel<T>, h, in, c.in_bases, out, c.count); return;
    case Kind::all_to_all: launch(l, all_to_all_kernel<T>, h, in, out, c.count); return;
    case Kind::all_to_all_direct: launch(l, all_to_all_direct_kernel<T>, h, in, c.in_bases, out, c.count); return;
    default: throw Error(ErrorCode::internal, "collectives: internal: not a data movement");
  }
}

bool moves_data(Kind k) {
  return k == Kind::broadcast || k == Kind::all_gather || k == Kind::all_gather_ll || k == Kind::all_gather_direct ||
         k == Kind::all_to_all || k == Kind::all_to_all_direct;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::barrier: return "barrier";
    case Kind::broadcast: return "broadcast";
    case Kind::broadcast_ll: return "broadcast (ll)";
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
    case Kind::all_reduce_two_shot_direct: return "all_reduce (two-shot, direct)";
    case Kind::all_to_all_direct: return "all_to_all (direct)";
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
    if (moves_data(c.kind)) {
      switch (size_of(c.type)) {
        case 1: launch_movement<std::uint8_t>(l, h, c); break;
        case 2: launch_movement<std::uint16_t>(l, h, c); break;
        case 4: launch_movement<std::uint32_t>(l, h, c); break;
        default: launch_movement<std::uint64_t>(l, h, c); break;
      }
    } else {
      switch (c.type) {
        case DataType::int8: launch_reduction<std::int8_t>(l, h, c); break;
        case DataType::uint8: launch_reduction<std::uint8_t>(l, h, c); break;
        case DataType::int32: launch_reduction<std::int32_t>(l, h, c); break;
        case DataType::uint32: launch_reduction<std::uint32_t>(l, h, c); break;
        case DataType::int64: launch_reduction<std::int64_t>(l, h, c); break;
        case DataType::uint64: launch_reduction<std::uint64_t>(l, h, c); break;
        case DataType::float16: launch_reduction<__half>(l, h, c); break;
        case DataType::bfloat16: launch_reduction<__nv_bfloat16>(l, h, c); break;
        case DataType::float32: launch_reduction<float>(l, h, c); break;
        case DataType::float64: launch_reduction<double>(l, h, c); break;
        case DataType::float8_e4m3: launch_reduction<__nv_fp8_e4m3>(l, h, c); break;
        case DataType::float8_e5m2: launch_reduction<__nv_fp8_e5m2>(l, h, c); break;
      }
    }
  }
  check_cuda(cudaGetLastError(), std::string("launching the ") + kind_name(c.kind) + " kernel (" +
                                     std::to_string(parts) + " blocks of " + std::to_string(threads) + " threads)");
}

void device_copy(void* out, const void* in, std::uint64_t bytes, void* stream) {
  check_cuda(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)),
             "cudaMemcpyAsync (a one-rank collective's copy)");
}

void device_read_status(const CollectiveHandle& h, void* stream, std::uint64_t* words) {
  check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
  check_cuda(cudaMemcpy(words, h.status, kStatusWords * sizeof(std::uint64_t), cudaMemcpyDeviceToHost), "cudaMemcpy(status)");
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
