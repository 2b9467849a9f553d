// src/collectives/device_reduce.cuh — launch_reduction<T>'s definition: every reduction kind
// for every ReduceOp of one element type. Included only by the device_reduce_<type>.cu files that
// src/collectives/CMakeLists.txt generates, each of which instantiates it for one element type.
#pragma once

#include "device_kernels.cuh"

namespace aperture::collectives::detail {

template <ReduceOp Op, class T>
void launch_reduction_op(const Launch& l, const CollectiveHandle& h, const Call& c) {
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
    case Kind::all_reduce_two_shot_direct:
      launch(l, all_reduce_two_shot_direct_kernel<Op, T>, h, in, c.in_bases, out, c.count);
      break;
    default: throw Error(ErrorCode::internal, "collectives: internal: not a reduction");
  }
}

template <class T>
void launch_reduction(const Launch& l, const CollectiveHandle& h, const Call& c) {
  switch (c.op) {
    case ReduceOp::sum: launch_reduction_op<ReduceOp::sum, T>(l, h, c); break;
    case ReduceOp::prod: launch_reduction_op<ReduceOp::prod, T>(l, h, c); break;
    case ReduceOp::min: launch_reduction_op<ReduceOp::min, T>(l, h, c); break;
    case ReduceOp::max: launch_reduction_op<ReduceOp::max, T>(l, h, c); break;
    case ReduceOp::avg: launch_reduction_op<ReduceOp::avg, T>(l, h, c); break;
  }
}

}  // namespace aperture::collectives::detail
