// aperture/collectives/broadcast.h — root's `in` lands in every rank's `out`.
//
//     broadcast(g, h, in, out, count, root)     out[i] = in[i] of rank root (in read on root only)
//
// Per piece: root copies its piece into its staging, barrier, every other rank gets it from
// root's staging. In place (in == out on root) is allowed. Every rank calls it with the same
// count and root; every thread of the group calls it.
#pragma once

#include <cstdint>

#include "aperture/collectives/barrier.h"
#include "aperture/collectives/bulk.h"
#include "aperture/collectives/partition.h"

namespace aperture::collectives {

template <class Group, class T>
APERTURE_HD bool broadcast(const Group& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count,
                           int root) {
  Session<Group> s(g, h);
  const int me = h.rank;
  const Range mine = split<T>(count, g.parts(), g.part());
  const std::uint64_t capacity = piece_capacity<T>(h, 1);
  for (std::uint64_t at = mine.begin; at < mine.end; at += capacity) {
    const std::uint64_t n = mine.end - at < capacity ? mine.end - at : capacity;
    if (me == root) group_copy(g, reinterpret_cast<T*>(s.next_half()), in + at, n);
    if (!s.barrier()) break;
    if (me == root) {
      group_copy(g, out + at, in + at, n);
    } else {
      group_get(g, out + at, reinterpret_cast<const T*>(s.current_half()), n, me, root, h.peer_bases);
    }
  }
  return s.finish();
}

}  // namespace aperture::collectives
