// aperture/collectives/broadcast.h — root's `in` lands in every rank's `out`.
//
//     broadcast(g, h, in, out, count, root)     out[i] = in[i] of rank root (in read on root only)
//
// Per piece: root copies its piece into its staging, barrier, every other rank gets it from
// root's staging. In place (in == out on root) is allowed. Every rank calls it with the same
// count and root; every thread of the group calls it.
#pragma once

#include <cstdint>

#include "aperture/collectives/detail/partition.h"
#include "aperture/collectives/detail/reduce.h"
#include "aperture/collectives/detail/staged.h"
#include "aperture/collectives/handle.h"
#include "aperture/coop_rma.h"

namespace aperture::collectives {

template <class Coop, class T>
APERTURE_HD bool broadcast(const Coop& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count,
                           int root) {
  const int me = h.rank;
  return detail::staged_pieces<T>(g, h, count, 1, [&](detail::Session<Coop>& s, std::uint64_t at, std::uint64_t n) {
    if (me == root) aperture::copy(g, reinterpret_cast<T*>(s.next_half()), in + at, n);
    if (!s.barrier()) return false;
    if (me == root) {
      aperture::copy(g, out + at, in + at, n);
    } else {
      aperture::get(g, out + at, reinterpret_cast<const T*>(s.current_half()), n, me, root, h.peer_bases);
    }
    return true;
  });
}

}  // namespace aperture::collectives
