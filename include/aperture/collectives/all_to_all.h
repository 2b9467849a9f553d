// aperture/collectives/all_to_all.h — block d of every rank's `in` lands on rank d.
//
//     all_to_all(g, h, in, out, count)     out[r * count + i] = in[me * count + i] of rank r
//                                          (in and out hold world * count elements)
//
// Per piece: copy the piece of every block into its slot of this rank's staging, barrier, get
// slot `me` of every rank. In place (in == out) is allowed.
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
    const std::uint64_t stride = detail::stage_blocks(g, reinterpret_cast<T*>(s.next_half()), in, count, at, n, h.world_size);
    if (!s.barrier()) return false;
    const T* staged = reinterpret_cast<const T*>(s.current_half()) + static_cast<std::uint64_t>(h.rank) * stride;
    detail::get_from_every_rank(g, h, out, count, at, staged, n);
    return true;
  });
}

}  // namespace aperture::collectives
