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
//     direct_pieces<T>(g, h, count, layout, read_offset, body, staged)   a barrier (every rank's
//         input is complete), body(at, n) per piece with no barrier in between, and a barrier (no
//         rank returns, and lets its input be overwritten, while a peer still reads it): two
//         barriers per call, whatever its size.
//
// How a rank lays out `in` and `out` decides what the zero-copy algorithm may do: a rank whose
// `out` overlaps its `in` where the algorithm would write while peers still read needs the
// staged algorithm (kNeedsStaged), and all_gather in place reads peers' `out` instead of their
// `in` (kInPlace). The ranks must agree, or they would run different algorithms, meet at
// different barriers or read the wrong buffer: each announces its layout with the call's first
// barrier (agree_on_layout), and every rank reads every rank's. With it each announces the byte
// offset in the symmetric allocation of what peers read (its `read_offset`): a peer is read at
// the reader's own offset (translate), so offsets that differ would read the wrong elements.
// All alike: the zero-copy algorithm, or, all kNeedsStaged, `staged()` (the staged algorithm,
// after that one barrier; it reads no peer's input, so offsets do not matter). Otherwise no rank
// runs either: each records in h.status the ranks whose layout was not kDisjoint
// (kStatusLayoutsDiffer) or, layouts alike, those whose offset is not rank 0's
// (kStatusOffsetsDiffer), and returns false; the host raises aperture::Error from it.
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

// The byte offset of `p` in this rank's part of the symmetric allocation `bases` describes.
template <class T>
APERTURE_HD std::uint64_t offset_in(const T* p, const std::int64_t* bases, int rank) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)) - static_cast<std::uint64_t>(bases[rank]);
}

// The word a rank announces with a zero-copy call's first barrier: the layout in the low two bits,
// the read offset above them (an allocation holds less than 2^62 bytes).
APERTURE_HD std::uint64_t announcement_of(std::uint64_t layout, std::uint64_t read_offset) {
  return layout | read_offset << 2;
}
APERTURE_HD std::uint64_t layout_of(std::uint64_t announcement) { return announcement & 3; }
APERTURE_HD std::uint64_t read_offset_of(std::uint64_t announcement) { return announcement >> 2; }

// Records in h.status, for every rank r, whether predicate(r) holds (rank r at bit r % 64 of word
// 1 + r / 64), and `what` in word 0 unless a failure is there already. Each word whole, with one
// store: every part (CUDA block) of this rank writes the same values.
template <class Coop, class Predicate>
APERTURE_HD void record_ranks(const Coop& g, const CollectiveHandle& h, std::uint64_t what, Predicate&& predicate) {
  if (g.thread_rank() != 0 || h.status == nullptr) return;
  for (std::uint64_t w = 1; w < kStatusWords; ++w) {
    std::uint64_t mask = 0;
    for (std::uint64_t bit = 0; bit < 64; ++bit) {
      const std::uint64_t r = (w - 1) * 64 + bit;
      if (r >= static_cast<std::uint64_t>(h.world_size)) break;
      if (predicate(static_cast<int>(r))) mask |= std::uint64_t{1} << bit;
    }
    h.status[w] = mask;
  }
  if (h.status[0] == 0) h.status[0] = what;
}

// The first barrier of a zero-copy call, announcing this rank's `layout` and `read_offset`; what
// the ranks agreed. `failed`: a device wait gave up (the Session records it).
template <class Coop>
APERTURE_HD Layout agree_on_layout(Session<Coop>& s, std::uint64_t layout, std::uint64_t read_offset) {
  const Coop& g = s.g;
  const CollectiveHandle& h = s.h;
  const std::uint64_t mine = announcement_of(layout, read_offset);
  if (!s.barrier_announcing(true, mine)) return Layout::failed;
  const auto word = [&](int rank) { return rank == h.rank ? mine : s.announced(rank); };
  bool layout_alike = true, offset_alike = true;
  for (int peer = static_cast<int>(g.thread_rank()); peer < h.world_size; peer += static_cast<int>(g.size())) {
    if (layout_of(word(peer)) != layout) layout_alike = false;
    if (read_offset_of(word(peer)) != read_offset) offset_alike = false;
  }
  // Every rank takes the same branch: if any two ranks differ, every rank differs from one.
  const bool layouts_alike = g.all(layout_alike);
  const bool offsets_alike = g.all(offset_alike);
  if (layouts_alike && layout == kNeedsStaged) return Layout::staged;
  if (layouts_alike && offsets_alike) return Layout::zero_copy;
  if (!layouts_alike) {
    record_ranks(g, h, kStatusLayoutsDiffer, [&](int r) { return layout_of(word(r)) != kDisjoint; });
  } else {
    const std::uint64_t reference = read_offset_of(word(0));
    record_ranks(g, h, kStatusOffsetsDiffer, [&](int r) { return read_offset_of(word(r)) != reference; });
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
                               std::uint64_t read_offset, Body&& body, Staged&& staged) {
  Session<Coop> s(g, h);
  const Layout layout = agree_on_layout(s, layout_word, read_offset);
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
