// src/collectives/host.cpp — the collectives on a CPU thread: the same templates the GPU
// kernels run, instantiated with aperture::CoopHost for the host element types.
#include <cstdint>
#include <string>

#include "aperture/collectives/all_gather.h"
#include "aperture/collectives/all_reduce.h"
#include "aperture/collectives/all_to_all.h"
#include "aperture/collectives/barrier.h"
#include "aperture/collectives/broadcast.h"
#include "aperture/collectives/reduce_scatter.h"
#include "aperture/coop.h"
#include "aperture/error.h"
#include "dispatch.h"

namespace aperture::collectives::detail {

namespace {

template <ReduceOp Op, class T>
void run_reduction(const CoopHost& g, const CollectiveHandle& h, const Call& c) {
  const auto* in = static_cast<const T*>(c.in);
  auto* out = static_cast<T*>(c.out);
  switch (c.kind) {
    case Kind::reduce_scatter: reduce_scatter<Op>(g, h, in, out, c.count); break;
    case Kind::all_reduce_one_shot: all_reduce_one_shot<Op>(g, h, in, out, c.count); break;
    case Kind::all_reduce_two_shot: all_reduce_two_shot<Op>(g, h, in, out, c.count); break;
    case Kind::reduce_scatter_ll: reduce_scatter_ll<Op>(g, h, in, out, c.count); break;
    case Kind::all_reduce_ll: all_reduce_ll<Op>(g, h, in, out, c.count); break;
    case Kind::reduce_scatter_direct: reduce_scatter_direct<Op>(g, h, in, c.in_bases, out, c.count); break;
    case Kind::all_reduce_direct: all_reduce_direct<Op>(g, h, in, c.in_bases, out, c.count); break;
    default: throw Error(ErrorCode::internal, "collectives: internal: not a reduction");
  }
}

template <class T>
void run_typed(const CoopHost& g, const CollectiveHandle& h, const Call& c) {
  const auto* in = static_cast<const T*>(c.in);
  auto* out = static_cast<T*>(c.out);
  switch (c.kind) {
    case Kind::broadcast: broadcast(g, h, in, out, c.count, c.root); return;
    case Kind::all_gather: all_gather(g, h, in, out, c.count); return;
    case Kind::all_gather_ll: all_gather_ll(g, h, in, out, c.count); return;
    case Kind::all_gather_direct: all_gather_direct(g, h, in, c.in_bases, out, c.count); return;
    case Kind::all_to_all: all_to_all(g, h, in, out, c.count); return;
    default: break;
  }
  switch (c.op) {
    case ReduceOp::sum: run_reduction<ReduceOp::sum, T>(g, h, c); break;
    case ReduceOp::min: run_reduction<ReduceOp::min, T>(g, h, c); break;
    case ReduceOp::max: run_reduction<ReduceOp::max, T>(g, h, c); break;
  }
}

}  // namespace

void run_on_host(const CollectiveHandle& h, const Call& c, unsigned spins) {
  CoopHost g;
  g.spins = spins;
  if (c.kind == Kind::barrier) {
    barrier(g, h);
    return;
  }
  switch (c.type) {
    case DataType::float32: run_typed<float>(g, h, c); break;
    case DataType::float64: run_typed<double>(g, h, c); break;
    case DataType::int32: run_typed<std::int32_t>(g, h, c); break;
    case DataType::int64: run_typed<std::int64_t>(g, h, c); break;
    default: throw Error(ErrorCode::invalid_argument, std::string("collectives: ") + name_of(c.type) + " is not a host type");
  }
}

}  // namespace aperture::collectives::detail
