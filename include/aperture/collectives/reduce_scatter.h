// aperture/collectives/reduce_scatter.h — block r of the reduction lands on rank r.
//
//     reduce_scatter<Op>(g, h, in, out, count)   out[i] = in[me * count + i] of rank 0 (op) ... of rank world-1
//                                                (in holds world * count elements, out count)
//
// Per piece: copy every block's piece into its slot of this rank's staging, barrier, fold slot
// `me` of every rank, in rank order. In place (out == in + me * count) is allowed.
#pragma once

#include <cstdint>

#include "aperture/collectives/barrier.h"
#include "aperture/collectives/bulk.h"
#include "aperture/collectives/partition.h"

namespace aperture::collectives {

template <ReduceOp Op, class Group, class T>
APERTURE_HD bool reduce_scatter(const Group& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count) {
  Session<Group> s(g, h);
  const int me = h.rank;
  const auto w = static_cast<std::uint64_t>(h.world_size);
  const Range mine = split<T>(count, g.parts(), g.part());
  const std::uint64_t capacity = piece_capacity<T>(h, w);
  for (std::uint64_t at = mine.begin; at < mine.end; at += capacity) {
    const std::uint64_t n = mine.end - at < capacity ? mine.end - at : capacity;
    const std::uint64_t stride = slot_stride<T>(n);
    T* stage = reinterpret_cast<T*>(s.next_half());
    for (std::uint64_t d = 0; d < w; ++d) group_copy(g, stage + d * stride, in + d * count + at, n);
    if (!s.barrier()) break;
    const T* staged = reinterpret_cast<const T*>(s.current_half()) + static_cast<std::uint64_t>(me) * stride;
    group_reduce_peers<Op>(g, out + at, staged, n, me, h.world_size, h.peer_bases);
  }
  return s.finish();
}

}  // namespace aperture::collectives
