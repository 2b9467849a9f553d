// aperture/collectives/reduce_scatter.h — block r of the reduction lands on rank r.
//
//     reduce_scatter<Op>(g, h, in, out, count)   out[i] = in[me * count + i] of rank 0 (op) ... of rank world-1
//                                                (in holds world * count elements, out count)
//
// Per piece: copy every block's piece into its slot of this rank's staging, barrier, fold slot
// `me` of every rank, in rank order. In place (out == in + me * count) is allowed.
//
//     reduce_scatter_ll<Op>(g, h, in, out, count)   the same result with no barrier: each rank
//         pushes block d of its input into rank d's LL slot and folds what lands in its own
//         (detail/ll.h). Small sizes.
//
//     reduce_scatter_direct<Op>(g, h, in, in_bases, out, count)   the same result, zero-copy: `in`
//         is symmetric (in_bases: its own peer table) and each rank folds block `me` of every
//         rank's input in place (detail/staged.h's direct_pieces). Where `out` overlaps `in`
//         the staged algorithm runs; every rank must lay out alike (detail/staged.h).
#pragma once

#include <cstdint>

#include "aperture/collectives/detail/ll.h"
#include "aperture/collectives/detail/partition.h"
#include "aperture/collectives/detail/reduce.h"
#include "aperture/collectives/detail/staged.h"
#include "aperture/collectives/handle.h"
#include "aperture/coop_rma.h"

namespace aperture::collectives {

template <ReduceOp Op, class Coop, class T>
APERTURE_HD bool reduce_scatter(const Coop& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count) {
  const auto w = static_cast<std::uint64_t>(h.world_size);
  return detail::staged_pieces<T>(g, h, count, w, [&](detail::Session<Coop>& s, std::uint64_t at, std::uint64_t n) {
    const std::uint64_t stride = detail::stage_blocks(g, reinterpret_cast<T*>(s.next_half()), in, count, at, n, h.world_size);
    if (!s.barrier()) return false;
    const T* staged = reinterpret_cast<const T*>(s.current_half()) + static_cast<std::uint64_t>(h.rank) * stride;
    detail::reduce_peers<Op>(g, out + at, staged, n, h.rank, h.world_size, h.peer_bases);
    return true;
  });
}

template <ReduceOp Op, class Coop, class T>
APERTURE_HD bool reduce_scatter_direct(const Coop& g, const CollectiveHandle& h, const T* in,
                                       const std::int64_t* in_bases, T* out, std::uint64_t count) {
  const T* own = in + static_cast<std::uint64_t>(h.rank) * count;
  // Writing `out` over `in` would change blocks peers still fold.
  const bool overlapping = detail::overlaps(in, static_cast<std::uint64_t>(h.world_size) * count, out, count);
  return detail::direct_pieces<T>(
      g, h, count, overlapping ? detail::kNeedsStaged : detail::kDisjoint, detail::offset_in(in, in_bases, h.rank),
      [&](std::uint64_t at, std::uint64_t n) {
        detail::reduce_peers<Op>(g, out + at, own + at, n, h.rank, h.world_size, in_bases);
      },
      [&] { return reduce_scatter<Op>(g, h, in, out, count); });
}

template <ReduceOp Op, class Coop, class T>
APERTURE_HD bool reduce_scatter_ll(const Coop& g, const CollectiveHandle& h, const T* in, T* out,
                                   std::uint64_t count) {
  return detail::ll_reduce<Op>(g, h, [in, count](int r) { return in + static_cast<std::uint64_t>(r) * count; }, out, count);
}

}  // namespace aperture::collectives
