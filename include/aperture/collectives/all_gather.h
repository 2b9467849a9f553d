// aperture/collectives/all_gather.h — every rank's `in` lands in every rank's `out`.
//
//     all_gather(g, h, in, out, count)     out[r * count + i] = in[i] of rank r
//
// Per piece: copy the piece into this rank's staging, barrier, get every rank's piece
// (staged.h). In place (in == out + rank * count) is allowed.
//
//     all_gather_ll(g, h, in, out, count)  the same result with no barrier: each rank pushes its
//                                          piece into every peer's LL slot (ll.h). Small sizes.
//     all_gather_direct(g, h, in, in_bases, out, count)   the same result, zero-copy: `in` is
//         symmetric (in_bases: its own peer table; the same offset on every rank) and every rank
//         reads the others' where it lies (staged.h's direct_pieces). In place (in == out +
//         rank * count, `out` then in that allocation) is allowed too.
#pragma once

#include <cstdint>

#include "aperture/collectives/barrier.h"
#include "aperture/collectives/bulk.h"
#include "aperture/collectives/ll.h"
#include "aperture/collectives/partition.h"
#include "aperture/collectives/staged.h"

namespace aperture::collectives {

template <class Group, class T>
APERTURE_HD bool all_gather(const Group& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count) {
  return staged_pieces<T>(g, h, count, 1, [&](Session<Group>& s, std::uint64_t at, std::uint64_t n) {
    group_copy(g, reinterpret_cast<T*>(s.next_half()), in + at, n);
    if (!s.barrier()) return false;
    get_from_every_rank(g, h, out, count, at, reinterpret_cast<const T*>(s.current_half()), n);
    return true;
  });
}

template <class Group, class T>
APERTURE_HD bool all_gather_direct(const Group& g, const CollectiveHandle& h, const T* in, const std::int64_t* in_bases,
                                   T* out, std::uint64_t count) {
  const bool in_place = in == out + static_cast<std::uint64_t>(h.rank) * count;
  return direct_pieces<T>(g, h, count, [&](std::uint64_t at, std::uint64_t n) {
    for (int j = 0; j < h.world_size; ++j) {
      const int from = (h.rank + j) % h.world_size;
      T* dst = out + static_cast<std::uint64_t>(from) * count + at;
      // In place, rank `from`'s input is its own block of `out` (in the same allocation).
      if (from != h.rank) {
        group_get(g, dst, in_place ? dst : in + at, n, h.rank, from, in_bases);
      } else if (!in_place) {
        group_copy(g, dst, in + at, n);
      }
    }
  });
}

template <class Group, class T>
APERTURE_HD bool all_gather_ll(const Group& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count) {
  constexpr std::uint64_t E = kLLElements<T>;
  const T* own = out + static_cast<std::uint64_t>(h.rank) * count;
  const bool in_aligned = ll_aligned(in);
  return ll_pieces<T>(g, h, count, [in](int) { return in; },
                      [&](LLPiece<Group>& piece, std::uint64_t at, std::uint64_t j, std::uint64_t valid) {
                        for (int r = 0; r < h.world_size; ++r) {
                          T* dst = out + static_cast<std::uint64_t>(r) * count + at + j * E;
                          if (r != h.rank) {
                            ll_unpack(dst, piece.receive(r, j), valid, ll_aligned(dst));
                          } else if (own != in) {
                            ll_unpack(dst, ll_pack(in + at + j * E, valid, in_aligned), valid, ll_aligned(dst));
                          }
                        }
                      });
}

}  // namespace aperture::collectives
