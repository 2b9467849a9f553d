// aperture/collectives/all_to_all.h — block d of every rank's `in` lands on rank d.
//
//     all_to_all(g, h, in, out, count)     out[r * count + i] = in[me * count + i] of rank r
//                                          (in and out hold world * count elements)
//
// Per piece: copy the piece of every peer's block into its slot of this rank's staging and this
// rank's own block straight from `in` to `out` (in place it is already there), barrier, get slot
// `me` of every peer. In place (in == out) is allowed: a piece of `out` is written only after the
// barrier that follows the staging of the same piece of `in`. (The own block through staging,
// as before, cost one copy of it more: 1.03-1.11x MPI_Alltoall at 2 ranks and 1-4 MiB,
// docs/PERFORMANCE.md.)
//
//     all_to_all_direct(g, h, in, in_bases, out, count)   the same result, zero-copy: `in` is
//         symmetric (in_bases: its own peer table; the same offset on every rank, checked) and
//         every rank gets block `me` of every rank's input where it lies (detail/staged.h's
//         direct_pieces): two barriers per call, whatever its size. Where `out` overlaps `in` the
//         staged algorithm runs; every rank must lay out alike (detail/staged.h).
#pragma once

#include <cstdint>

#include "aperture/collectives/detail/partition.h"
#include "aperture/collectives/detail/reduce.h"
#include "aperture/collectives/detail/staged.h"
#include "aperture/collectives/handle.h"
#include "aperture/coop_rma.h"

namespace aperture::collectives {

template <class Coop, class T>
APERTURE_HD bool all_to_all(const Coop& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count) {
  const auto w = static_cast<std::uint64_t>(h.world_size);
  return detail::staged_pieces<T>(g, h, count, w, [&](detail::Session<Coop>& s, std::uint64_t at, std::uint64_t n) {
    const auto me = static_cast<std::uint64_t>(h.rank);
    const std::uint64_t stride = detail::slot_stride<T>(n);
    T* stage = reinterpret_cast<T*>(s.next_half());
    for (std::uint64_t d = 0; d < w; ++d)
      if (d != me) aperture::copy(g, stage + d * stride, in + d * count + at, n);
    // Disjoint in and out: out's block `me` is no peer's source. In place: the same memory (no copy).
    aperture::copy(g, out + me * count + at, in + me * count + at, n);
    if (!s.barrier()) return false;
    const T* staged = reinterpret_cast<const T*>(s.current_half()) + me * stride;
    for (int j = 1; j < h.world_size; ++j) {
      const int from = (h.rank + j) % h.world_size;
      aperture::get(g, out + static_cast<std::uint64_t>(from) * count + at, staged, n, h.rank, from, h.peer_bases);
    }
    return true;
  });
}

template <class Coop, class T>
APERTURE_HD bool all_to_all_direct(const Coop& g, const CollectiveHandle& h, const T* in, const std::int64_t* in_bases,
                                   T* out, std::uint64_t count) {
  const auto w = static_cast<std::uint64_t>(h.world_size);
  const T* mine = in + static_cast<std::uint64_t>(h.rank) * count;  // block `me`, on every rank
  // Writing `out` over `in` would change blocks peers still read.
  return detail::direct_pieces<T>(
      g, h, count, detail::overlaps(in, w * count, out, w * count) ? detail::kNeedsStaged : detail::kDisjoint,
      detail::offset_in(in, in_bases, h.rank), [&](std::uint64_t at, std::uint64_t n) {
        for (int j = 0; j < h.world_size; ++j) {
          const int from = (h.rank + j) % h.world_size;
          aperture::get(g, out + static_cast<std::uint64_t>(from) * count + at, mine + at, n, h.rank, from, in_bases);
        }
      },
      [&] { return all_to_all(g, h, in, out, count); });
}

}  // namespace aperture::collectives
