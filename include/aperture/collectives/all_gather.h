// aperture/collectives/all_gather.h — every rank's `in` lands in every rank's `out`.
//
//     all_gather(g, h, in, out, count)     out[r * count + i] = in[i] of rank r
//
// Per piece: copy the piece into this rank's staging, barrier, get every rank's piece
// (detail/staged.h). In place (in == out + rank * count) is allowed.
//
//     all_gather_ll(g, h, in, out, count)  the same result with no barrier: each rank pushes its
//                                          piece into every peer's LL slot (detail/ll.h). Small sizes.
//     all_gather_direct(g, h, in, in_bases, out, count)   the same result, zero-copy: `in` is
//         symmetric (in_bases: its own peer table; the same offset on every rank, checked) and
//         every rank reads the others' where it lies (detail/staged.h's direct_pieces). In place
//         (in == out + rank * count, `out` then in that allocation) is allowed too; other overlaps
//         of `in` and `out` run the staged algorithm. Every rank must lay out alike
//         (detail/staged.h).
#pragma once

#include <cstdint>

#include "aperture/collectives/detail/ll.h"
#include "aperture/collectives/detail/partition.h"
#include "aperture/collectives/detail/reduce.h"
#include "aperture/collectives/detail/staged.h"
#include "aperture/collectives/handle.h"
#include "aperture/coop_rma.h"

namespace aperture::collectives {

template <class Coop, class T>
APERTURE_HD bool all_gather(const Coop& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count) {
  return detail::staged_pieces<T>(g, h, count, 1, [&](detail::Session<Coop>& s, std::uint64_t at, std::uint64_t n) {
    aperture::copy(g, reinterpret_cast<T*>(s.next_half()), in + at, n);
    if (!s.barrier()) return false;
    detail::get_from_every_rank(g, h, out, count, at, reinterpret_cast<const T*>(s.current_half()), n);
    return true;
  });
}

template <class Coop, class T>
APERTURE_HD bool all_gather_direct(const Coop& g, const CollectiveHandle& h, const T* in, const std::int64_t* in_bases,
                                   T* out, std::uint64_t count) {
  const auto w = static_cast<std::uint64_t>(h.world_size);
  const bool in_place = in == out + static_cast<std::uint64_t>(h.rank) * count;
  std::uint64_t layout = detail::kDisjoint;
  if (in_place) layout = detail::kInPlace;
  else if (detail::overlaps(in, count, out, w * count)) layout = detail::kNeedsStaged;
  // Peers read this rank's `in`, or in place its `out` (whose block `me` is `in`), at their own offset.
  const std::uint64_t read_offset = detail::offset_in(in_place ? static_cast<const T*>(out) : in, in_bases, h.rank);
  return detail::direct_pieces<T>(g, h, count, layout, read_offset, [&](std::uint64_t at, std::uint64_t n) {
    for (int j = 0; j < h.world_size; ++j) {
      const int from = (h.rank + j) % h.world_size;
      T* dst = out + static_cast<std::uint64_t>(from) * count + at;
      // In place, rank `from`'s input is its own block of `out` (in the same allocation).
      if (from != h.rank) {
        aperture::get(g, dst, in_place ? dst : in + at, n, h.rank, from, in_bases);
      } else if (!in_place) {
        aperture::copy(g, dst, in + at, n);
      }
    }
  }, [&] { return all_gather(g, h, in, out, count); });
}

template <class Coop, class T>
APERTURE_HD bool all_gather_ll(const Coop& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count) {
  constexpr std::uint64_t E = detail::kLLElements<T>;
  const T* own = out + static_cast<std::uint64_t>(h.rank) * count;
  const bool in_aligned = detail::ll_aligned(in);
  return detail::ll_pieces<T>(g, h, count, [in](int) { return in; },
                      [&](detail::LLPiece<Coop>& piece, std::uint64_t at, std::uint64_t j, std::uint64_t valid) {
                        for (int r = 0; r < h.world_size; ++r) {
                          T* dst = out + static_cast<std::uint64_t>(r) * count + at + j * E;
                          if (r != h.rank) {
                            detail::ll_unpack(dst, piece.receive(r, j), valid, detail::ll_aligned(dst));
                          } else if (own != in) {
                            detail::ll_unpack(dst, detail::ll_pack(in + at + j * E, valid, in_aligned), valid, detail::ll_aligned(dst));
                          }
                        }
                      });
}

}  // namespace aperture::collectives
