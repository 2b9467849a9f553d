// aperture/collectives/all_to_all.h — block d of every rank's `in` lands on rank d.
//
//     all_to_all(g, h, in, out, count)     out[r * count + i] = in[me * count + i] of rank r
//                                          (in and out hold world * count elements)
//
// Per piece: copy the piece of every block into its slot of this rank's staging, barrier, get
// slot `me` of every rank. In place (in == out) is allowed.
#pragma once

#include <cstdint>

#include "aperture/collectives/barrier.h"
#include "aperture/collectives/bulk.h"
#include "aperture/collectives/partition.h"

namespace aperture::collectives {

template <class Group, class T>
APERTURE_HD bool all_to_all(const Group& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count) {
  Session<Group> s(g, h);
  const int me = h.rank;
  const int world = h.world_size;
  const auto w = static_cast<std::uint64_t>(world);
  const Range mine = split<T>(count, g.parts(), g.part());
  const std::uint64_t capacity = piece_capacity<T>(h, w);
  for (std::uint64_t at = mine.begin; at < mine.end; at += capacity) {
    const std::uint64_t n = mine.end - at < capacity ? mine.end - at : capacity;
    const std::uint64_t stride = slot_stride<T>(n);
    T* stage = reinterpret_cast<T*>(s.next_half());
    for (std::uint64_t d = 0; d < w; ++d) group_copy(g, stage + d * stride, in + d * count + at, n);
    if (!s.barrier()) break;
    const T* staged = reinterpret_cast<const T*>(s.current_half()) + static_cast<std::uint64_t>(me) * stride;
    for (int j = 0; j < world; ++j) {
      const int from = (me + j) % world;
      group_get(g, out + static_cast<std::uint64_t>(from) * count + at, staged, n, me, from, h.peer_bases);
    }
  }
  return s.finish();
}

}  // namespace aperture::collectives
