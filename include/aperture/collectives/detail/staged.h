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
//     direct_pieces<T>(g, h, count, layout, body, staged)   a barrier (every rank's input is
//         complete), body(at, n) per piece with no barrier in between, and a barrier (no rank
//         returns, and lets its input be overwritten, while a peer still reads it): two barriers
//         per call, whatever its size.
//
// How a rank lays out `in` and `out` decides what the zero-copy algorithm may do: a rank whose
// `out` overlaps its `in` where the algorithm would write while peers still read needs the
// staged algorithm (kNeedsStaged), and all_gather in place reads peers' `out` instead of their
// `in` (kInPlace). The ranks must agree, or they would run different algorithms, meet at
// different barriers or read the wrong buffer: each announces its layout with the call's first
// barrier (agree_on_layout), and every rank reads every rank's. All alike: the zero-copy
// algorithm, or, all kNeedsStaged, `staged()` (the staged algorithm, after that one barrier).
// Otherwise no rank runs either: each records the ranks whose layout was not kDisjoint in
// h.status (kStatusLayoutsDiffer) and returns false; the host raises aperture::Error from it.
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
  for_each_piece<T>(g, count, piece_capacity<T>(h, slots), [&](std::uint64_t at, std::uint64_t n, bool) {
    return body(s, at, n);
  });
  return s.finish();
}

// True when [a, a + a_count) and [b, b + b_count) share an element.
template <class T>
APERTURE_HD bool overlaps(const T* a, std::uint64_t a_count, const T* b, std::uint64_t b_count) {
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + b_count * sizeof(T) && y < x + a_count * sizeof(T);
}

// What a rank announces (see above).
inline constexpr std::uint64_t kDisjoint = 0;
inline constexpr std::uint64_t kNeedsStaged = 1;
inline constexpr std::uint64_t kInPlace = 2;

enum class Layout { zero_copy, staged, differ, failed };

// The first barrier of a zero-copy call, announcing this rank's `layout`; what the ranks agreed.
// `failed`: a device wait gave up (the Session records it).
template <class Coop>
APERTURE_HD Layout agree_on_layout(Session<Coop>& s, std::uint64_t layout) {
  const Coop& g = s.g;
  const CollectiveHandle& h = s.h;
  if (!s.barrier_announcing(true, layout)) return Layout::failed;
  bool alike = true;
  for (int peer = static_cast<int>(g.thread_rank()); peer < h.world_size; peer += static_cast<int>(g.size()))
    if (peer != h.rank && s.announced(peer) != layout) alike = false;
  if (g.all(alike)) return layout == kNeedsStaged ? Layout::staged : Layout::zero_copy;
  // Each word whole, with one store: every part (CUDA block) of this rank writes the same values.
  if (g.thread_rank() == 0 && h.status != nullptr) {
    for (std::uint64_t w = 1; w < kStatusWords; ++w) {
      std::uint64_t overlapping = 0;
      for (std::uint64_t bit = 0; bit < 64; ++bit) {
        const std::uint64_t r = (w - 1) * 64 + bit;
        if (r >= static_cast<std::uint64_t>(h.world_size)) break;
        const int rank = static_cast<int>(r);
        if ((rank == h.rank ? layout : s.announced(rank)) != kDisjoint) overlapping |= std::uint64_t{1} << bit;
      }
      h.status[w] = overlapping;
    }
    if (h.status[0] == 0) h.status[0] = kStatusLayoutsDiffer;
  }
  return Layout::differ;
}

// The end of a zero-copy call whose first barrier said `layout`: finishes the Session, then runs
// `staged()` where every rank asked for it. False unless the call's result is there.
template <class Coop, class Staged>
APERTURE_HD bool finish_zero_copy(Session<Coop>& s, Layout layout, Staged&& staged) {
  const bool ok = s.finish();
  if (layout == Layout::staged) return ok && staged();
  return ok && layout == Layout::zero_copy;
}

// The zero-copy algorithm once the ranks agreed on it: body(at, n) per piece of this part with no
// barrier in between, then the barrier that keeps every rank from returning (and letting its
// input be overwritten) while a peer still reads it.
template <class T, class Coop, class Body>
APERTURE_HD void read_in_place(Session<Coop>& s, std::uint64_t count, Body&& body) {
  for_each_piece<T>(s.g, count, piece_capacity<T>(s.h, 1), [&](std::uint64_t at, std::uint64_t n, bool) {
    body(at, n);
    return true;
  });
  s.barrier();
}

template <class T, class Coop, class Body, class Staged>
APERTURE_HD bool direct_pieces(const Coop& g, const CollectiveHandle& h, std::uint64_t count, std::uint64_t layout_word,
                               Body&& body, Staged&& staged) {
  Session<Coop> s(g, h);
  const Layout layout = agree_on_layout(s, layout_word);
  if (layout == Layout::zero_copy) read_in_place<T>(s, count, body);
  return finish_zero_copy(s, layout, staged);
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
