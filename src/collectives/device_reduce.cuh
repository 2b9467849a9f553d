// src/collectives/device_reduce.cuh — launch_reduction<T>'s definition: every reduction kind
// for every ReduceOp of one element type. Included only by the device_reduce_<type>.cu files that
// src/collectives/CMakeLists.txt generates, each of which instantiates it for one element type
// (its CudaType, element_types.h).
#pragma once

#include "device_kernels.cuh"

namespace aperture::collectives::detail {

template <class T>
void launch_reduction(const Launch& l, const CollectiveHandle& h, const Call& c) {
  dispatch_reduction(c, [&]<Kind K, ReduceOp Op>() { launch<K, Op, T>(l, h, c); });
}

}  // namespace aperture::collectives::detail
