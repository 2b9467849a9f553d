// src/collectives/device_fold_nodes.cu — the cross-node fold of hierarchical.h on the GPU, for the
// NCCL path: the nodes' partial results (gathered by NCCL into GPU memory) folded in node order by
// the same Fold as fold_nodes on the host and the node's own kernels, on the caller's stream, so
// that every rank, and either path between nodes, gets the same bits. And avg's pre-scale.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "aperture/collectives/detail/reduce.h"
#include "aperture/error.h"
#include "element_types.h"
#include "hierarchical.h"

namespace aperture::collectives::detail {

namespace {

constexpr int kThreads = 256;
constexpr std::uint64_t kMaxBlocks = 1024;

int blocks_for(std::uint64_t count) {
  return static_cast<int>(std::clamp<std::uint64_t>((count + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

void check_launch(const char* what) {
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    throw Error(ErrorCode::internal, std::string("Communicator (across nodes): ") + what + " launch failed: " +
                                         cudaGetErrorString(e), "cudaLaunchKernel");
}

// parts: node m's partial at parts + m * count. avg folds as a sum; `divide` then divides integers.
template <ReduceOp Op, class T>
__global__ void fold_nodes_kernel(const T* parts, int nodes, T* out, std::uint64_t count, int world, bool divide) {
  const Fold<Op, T> f(1);  // the inputs are partial results: no scaling here
  const Fold<ReduceOp::avg, T> average(world);
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    auto acc = f.first(parts[i]);
    for (int m = 1; m < nodes; ++m) acc = f.next(acc, parts[static_cast<std::uint64_t>(m) * count + i]);
    if constexpr (Fold<ReduceOp::avg, T>::kDivides) {
      if (divide) {
        out[i] = average.last(acc);
        continue;
      }
    }
    out[i] = f.last(acc);
  }
}

template <class T>
__global__ void prescale_kernel(const T* in, T* out, std::uint64_t count, int world) {
  const Fold<ReduceOp::avg, T> f(world);
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    out[i] = Accumulate<T>::out(f.first(in[i]));  // exact: first() rounded it
}

}  // namespace

void device_fold_nodes(DataType type, ReduceOp op, const void* parts, int nodes, void* out, std::size_t count, int world,
                       void* stream) {
  if (count == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  visit_element_type(type, [&]<DataType D>() {
    using T = CudaType<D>;
    const auto* p = static_cast<const T*>(parts);
    auto* o = static_cast<T*>(out);
    visit_reduce_op(op, [&]<ReduceOp Op>() {
      // avg folds as a sum, then divides integers (its floats were pre-scaled: device_prescale).
      constexpr ReduceOp folded = Op == ReduceOp::avg ? ReduceOp::sum : Op;
      fold_nodes_kernel<folded, T><<<blocks_for(count), kThreads, 0, s>>>(p, nodes, o, count, world, Op == ReduceOp::avg);
    });
  });
  check_launch("the fold of the nodes' partial results");
}

void device_prescale(DataType type, const void* in, void* out, std::size_t count, int world, void* stream) {
  if (count == 0) return;
  visit_element_type(type, [&]<DataType D>() {
    using T = CudaType<D>;
    if constexpr (!std::is_integral_v<typename Accumulate<T>::type>) {
      prescale_kernel<T><<<blocks_for(count), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<const T*>(in), static_cast<T*>(out), count, world);
    }
  });
  check_launch("avg's pre-scale");
}

}  // namespace aperture::collectives::detail
