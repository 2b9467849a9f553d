// src/collectives/host.cpp — the collectives on a CPU thread: the same templates the GPU
// kernels run, instantiated with aperture::CoopHost: the data movers here, the reductions of
// every element type in files of their own (host_reduce.h; the narrow floats as their bits,
// detail/float_formats.h).
#include <cstdint>
#include <string>

#include "aperture/collectives/all_gather.h"
#include "aperture/collectives/all_to_all.h"
#include "aperture/collectives/barrier.h"
#include "aperture/collectives/broadcast.h"
#include "aperture/collectives/detail/float_formats.h"
#include "aperture/coop.h"
#include "aperture/error.h"
#include "dispatch.h"
#include "host_reduce.h"

namespace aperture::collectives::detail {

namespace {

// Moving data depends on the element's size only: one instantiation per size.
template <class T>
void run_movement(const CoopHost& g, const CollectiveHandle& h, const Call& c) {
  const auto* in = static_cast<const T*>(c.in);
  auto* out = static_cast<T*>(c.out);
  switch (c.kind) {
    case Kind::broadcast: broadcast(g, h, in, out, c.count, c.root); return;
    case Kind::broadcast_ll: broadcast_ll(g, h, in, out, c.count, c.root); return;
    case Kind::all_gather: all_gather(g, h, in, out, c.count); return;
    case Kind::all_gather_ll: all_gather_ll(g, h, in, out, c.count); return;
    case Kind::all_gather_direct: all_gather_direct(g, h, in, c.in_bases, out, c.count); return;
    case Kind::all_to_all: all_to_all(g, h, in, out, c.count); return;
    case Kind::all_to_all_direct: all_to_all_direct(g, h, in, c.in_bases, out, c.count); return;
    default: throw Error(ErrorCode::internal, "collectives: internal: not a data movement");
  }
}

bool moves_data(Kind k) {
  return k == Kind::broadcast || k == Kind::broadcast_ll || k == Kind::all_gather || k == Kind::all_gather_ll || k == Kind::all_gather_direct ||
         k == Kind::all_to_all || k == Kind::all_to_all_direct;
}

}  // namespace

void run_on_host(const CollectiveHandle& h, const Call& c, unsigned spins) {
  CoopHost g;
  g.spins = spins;
  if (c.kind == Kind::barrier) {
    barrier(g, h);
    return;
  }
  if (moves_data(c.kind)) {
    switch (size_of(c.type)) {
      case 1: run_movement<std::uint8_t>(g, h, c); return;
      case 2: run_movement<std::uint16_t>(g, h, c); return;
      case 4: run_movement<std::uint32_t>(g, h, c); return;
      default: run_movement<std::uint64_t>(g, h, c); return;
    }
  }
  switch (c.type) {
    case DataType::int8: run_host_reduction<std::int8_t>(g, h, c); break;
    case DataType::uint8: run_host_reduction<std::uint8_t>(g, h, c); break;
    case DataType::int32: run_host_reduction<std::int32_t>(g, h, c); break;
    case DataType::uint32: run_host_reduction<std::uint32_t>(g, h, c); break;
    case DataType::int64: run_host_reduction<std::int64_t>(g, h, c); break;
    case DataType::uint64: run_host_reduction<std::uint64_t>(g, h, c); break;
    case DataType::float16: run_host_reduction<Float16Bits>(g, h, c); break;
    case DataType::bfloat16: run_host_reduction<BFloat16Bits>(g, h, c); break;
    case DataType::float32: run_host_reduction<float>(g, h, c); break;
    case DataType::float64: run_host_reduction<double>(g, h, c); break;
    case DataType::float8_e4m3: run_host_reduction<Float8E4M3Bits>(g, h, c); break;
    case DataType::float8_e5m2: run_host_reduction<Float8E5M2Bits>(g, h, c); break;
  }
}

}  // namespace aperture::collectives::detail
