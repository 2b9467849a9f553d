// aperture/collectives/detail/staged.h — the steps the staged (and the zero-copy) algorithms share.
//
// A staged collective runs, per piece: copy into this rank's staging half (next_half()), cross
// a barrier, then pull from the peers' halves (current_half(), through translate). The reuse
// rule that makes this safe without a trailing barrier is session.h's.
//
//     staged_pieces<T>(g, h, count, slots, body)   the piece loop on a Session: body(s, at, n)
//         per piece of at most one slot (a staging half cut into `slots`); false stops it
//     stage_blocks(g, stage, in, count, at, n, blocks)   block d's piece into slot d, d < blocks;
//         returns the slots' stride
//     get_from_every_rank(g, h, out, count, at, staged, n)   rank r's staged piece into
//         out + r * count + at: own first, then the next ranks in turn (so the ranks do not all
//         read one peer at once)
//
// Where the caller's input is itself symmetric (allocated by a provider, with its own peer
// table), the staging copy can be skipped: peers read the input where it lies. Then
//     direct_pieces<T>(g, h, count, body)   a barrier (every rank's input is complete), body(at, n)
//         per piece with no barrier in between, and a barrier (no rank returns, and lets its input
//         be overwritten, while a peer still reads it): two barriers per call, whatever its size.
#pragma once

#include <cstdint>

#include "aperture/collectives/detail/partition.h"
#include "aperture/collectives/detail/session.h"
#include "aperture/coop_rma.h"

namespace aperture::collectives::detail {

template <class T, class Coop, class Body>
APERTURE_HD bool staged_pieces(const Coop& g, const CollectiveHandle& h, std::uint64_t count, std::uint64_t slots,
                               Body&& body) {
  Session<Coop> s(g, h);
  for_each_piece<T>(g, count, piece_capacity<T>(h, slots), h.interleave,
                    [&](std::uint64_t at, std::uint64_t n, bool) { return body(s, at, n); });
  return s.finish();
}

template <class T, class Coop, class Body>
APERTURE_HD bool direct_pieces(const Coop& g, const CollectiveHandle& h, std::uint64_t count, Body&& body) {
  Session<Coop> s(g, h);
  if (s.barrier()) {
    for_each_piece<T>(g, count, piece_capacity<T>(h, 1), h.interleave, [&](std::uint64_t at, std::uint64_t n, bool) {
      body(at, n);
      return true;
    });
    s.barrier();
  }
  return s.finish();
}

template <class Coop, class T>
APERTURE_HD std::uint64_t stage_blocks(const Coop& g, T* stage, const T* in, std::uint64_t count, std::uint64_t at,
                                       std::uint64_t n, int blocks) {
  const std::uint64_t stride = slot_stride<T>(n);
  for (std::uint64_t d = 0; d < static_cast<std::uint64_t>(blocks); ++d)
    aperture::copy(g, stage + d * stride, in + d * count + at, n);
  return stride;
}

template <class Coop, class T>
APERTURE_HD void get_from_every_rank(const Coop& g, const CollectiveHandle& h, T* out, std::uint64_t count,
                                     std::uint64_t at, const T* staged, std::uint64_t n) {
  for (int j = 0; j < h.world_size; ++j) {
    const int from = (h.rank + j) % h.world_size;
    aperture::get(g, out + static_cast<std::uint64_t>(from) * count + at, staged, n, h.rank, from, h.peer_bases);
  }
}

}  // namespace aperture::collectives::detail
