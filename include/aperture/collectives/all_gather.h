// aperture/collectives/all_gather.h — every rank's `in` lands in every rank's `out`.
//
//     all_gather(g, h, in, out, count)     out[r * count + i] = in[i] of rank r
//
// Per piece: copy the piece into this rank's staging, barrier, get every rank's piece (own
// first, then the next ranks in turn, so the ranks do not all read one peer at once). In place
// (in == out + rank * count) is allowed.
//
//     all_gather_ll(g, h, in, out, count)  the same result with no barrier: each rank pushes its
//                                          piece into every peer's LL slot (ll.h). Small sizes.
#pragma once

#include <cstdint>

#include "aperture/collectives/barrier.h"
#include "aperture/collectives/bulk.h"
#include "aperture/collectives/ll.h"
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

template <class Group, class T>
APERTURE_HD bool all_gather_ll(const Group& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count) {
  constexpr std::uint64_t E = kLLElements<T>;
  Session<Group> s(g, h);
  const int me = h.rank;
  const int world = h.world_size;
  const bool in_aligned = ll_aligned(in);
  T* own = out + static_cast<std::uint64_t>(me) * count;
  const Range mine = split<T>(count, g.parts(), g.part());
  const std::uint64_t capacity = ll_capacity<T>(h);
  for (std::uint64_t at = mine.begin; at < mine.end; at += capacity) {
    const std::uint64_t n = mine.end - at < capacity ? mine.end - at : capacity;
    const std::uint64_t lines = ll_lines<T>(n);
    LLPiece<Group> piece(s);
    for (int d = 1; d < world; ++d) {
      LLLine* dst = piece.remote_slot((me + d) % world);
      for (std::uint64_t j = g.thread(); j < lines; j += g.threads())
        detail::ll_store(dst + j, ll_pack(in + at + j * E, ll_valid<T>(n, j), in_aligned), piece.flag);
    }
    for (std::uint64_t j = g.thread(); j < lines; j += g.threads()) {
      const std::uint64_t valid = ll_valid<T>(n, j);
      for (int r = 0; r < world; ++r) {
        T* dst = out + static_cast<std::uint64_t>(r) * count;
        if (r != me) {
          ll_unpack(dst + at + j * E, piece.receive(r, j), valid, ll_aligned(dst));
        } else if (own != in) {
          ll_unpack(dst + at + j * E, ll_pack(in + at + j * E, valid, in_aligned), valid, ll_aligned(dst));
        }
      }
    }
    if (!piece.done(at + capacity < mine.end)) break;
  }
  return s.finish();
}

}  // namespace aperture::collectives
