// aperture/collectives/all_gather.h — every rank's `in` lands in every rank's `out`.
//
//     all_gather(g, h, in, out, count)     out[r * count + i] = in[i] of rank r
//
// Per piece: copy the piece into this rank's staging, barrier, get every rank's piece (own
// first, then the next ranks in turn, so the ranks do not all read one peer at once). In place
// (in == out + rank * count) is allowed.
#pragma once

#include <cstdint>

#include "aperture/collectives/barrier.h"
#include "aperture/collectives/bulk.h"
#include "aperture/collectives/partition.h"

namespace aperture::collectives {

template <class Group, class T>
APERTURE_HD bool all_gather(const Group& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count) {
  Session<Group> s(g, h);
  const int me = h.rank;
  const int world = h.world_size;
  const Range mine = split<T>(count, g.parts(), g.part());
  const std::uint64_t capacity = piece_capacity<T>(h, 1);
  for (std::uint64_t at = mine.begin; at < mine.end; at += capacity) {
    const std::uint64_t n = mine.end - at < capacity ? mine.end - at : capacity;
    group_copy(g, reinterpret_cast<T*>(s.next_half()), in + at, n);
    if (!s.barrier()) break;
    const T* staged = reinterpret_cast<const T*>(s.current_half());
    for (int j = 0; j < world; ++j) {
      const int from = (me + j) % world;
      group_get(g, out + static_cast<std::uint64_t>(from) * count + at, staged, n, me, from, h.peer_bases);
    }
  }
  return s.finish();
}

}  // namespace aperture::collectives
