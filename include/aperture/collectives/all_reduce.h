// aperture/collectives/all_reduce.h — every rank gets the reduction of every rank's `in`.
//
//     all_reduce_one_shot<Op>(g, h, in, out, count)   one barrier per piece; each rank reads
//         every rank's piece and folds it: least latency, world x the reads. For small sizes.
//     all_reduce_two_shot<Op>(g, h, in, out, count)   two barriers per piece: rank c folds chunk
//         c of the piece (a reduce-scatter), then every rank gets every chunk (an all-gather):
//         each rank reads about 2x the piece, whatever the world size. For large sizes.
//     all_reduce_ll<Op>(g, h, in, out, count)         no barrier: each rank pushes its data with
//         an epoch flag into every peer's LL slot and folds what lands in its own memory (detail/ll.h):
//         one NVLink trip per call, 2x the bytes on the wire. For the smallest sizes.
//     all_reduce_direct<Op>(g, h, in, in_bases, out, count)   one-shot, zero-copy: `in` is
//         symmetric (in_bases: its own peer table) and each rank folds every rank's input in
//         place (detail/staged.h's direct_pieces): two barriers per call. Where `out` overlaps
//         `in` the staged one-shot runs.
//     all_reduce_two_shot_direct<Op>(g, h, in, in_bases, out, count)   two-shot, zero-copy: rank c
//         folds chunk c of every rank's input where it lies into its staging, then every rank
//         gets every chunk: one barrier per piece and one more per call (the staged two-shot:
//         a copy and two barriers per piece). In place (in == out) is allowed; other overlaps
//         run the staged two-shot.
//     Both zero-copy forms need every rank to lay out `in` and `out` alike (detail/staged.h).
//     all_reduce<Op>(g, h, in, out, count, two_shot)  one of the first two
//
// out[i] = in[i] of rank 0 (op) in[i] of rank 1 (op) ... of rank world-1, in rank order on every
// rank, so every rank's result is bit-identical, whichever algorithm ran. In place (in == out)
// is allowed. The host entry (aperture::Communicator::all_reduce) chooses by size.
#pragma once

#include <cstdint>

#include "aperture/collectives/detail/ll.h"
#include "aperture/collectives/detail/partition.h"
#include "aperture/collectives/detail/reduce.h"
#include "aperture/collectives/detail/staged.h"
#include "aperture/collectives/handle.h"
#include "aperture/coop_rma.h"

namespace aperture::collectives {

namespace detail {
// The second half of a two-shot all-reduce: every rank has folded its chunk of the piece (n
// elements) into `folded`, its staging; each rank gets all of them into `out`, its own first.
template <class Coop, class T>
APERTURE_HD void gather_folded_chunks(const Coop& g, const CollectiveHandle& h, const T* folded, T* out,
                                      std::uint64_t n) {
  for (int j = 0; j < h.world_size; ++j) {
    const int from = (h.rank + j) % h.world_size;
    const Range c = split<T>(n, h.world_size, from);
    aperture::get(g, out + c.begin, folded + c.begin, c.size(), h.rank, from, h.peer_bases);
  }
}
}  // namespace detail

template <ReduceOp Op, class Coop, class T>
APERTURE_HD bool all_reduce_one_shot(const Coop& g, const CollectiveHandle& h, const T* in, T* out,
                                     std::uint64_t count) {
  return detail::staged_pieces<T>(g, h, count, 1, [&](detail::Session<Coop>& s, std::uint64_t at, std::uint64_t n) {
    aperture::copy(g, reinterpret_cast<T*>(s.next_half()), in + at, n);
    if (!s.barrier()) return false;
    detail::reduce_peers<Op>(g, out + at, reinterpret_cast<const T*>(s.current_half()), n, h.rank, h.world_size,
                           h.peer_bases);
    return true;
  });
}

template <ReduceOp Op, class Coop, class T>
APERTURE_HD bool all_reduce_two_shot(const Coop& g, const CollectiveHandle& h, const T* in, T* out,
                                     std::uint64_t count) {
  return detail::staged_pieces<T>(g, h, count, 1, [&](detail::Session<Coop>& s, std::uint64_t at, std::uint64_t n) {
    aperture::copy(g, reinterpret_cast<T*>(s.next_half()), in + at, n);
    if (!s.barrier()) return false;
    // Reduce-scatter: fold my chunk of every rank's piece into the other half, where it is the
    // data of the next barrier.
    const detail::Range chunk = detail::split<T>(n, h.world_size, h.rank);
    detail::reduce_peers<Op>(g, reinterpret_cast<T*>(s.next_half()) + chunk.begin,
                           reinterpret_cast<const T*>(s.current_half()) + chunk.begin, chunk.size(), h.rank,
                           h.world_size, h.peer_bases);
    if (!s.barrier()) return false;
    // All-gather: every rank's folded chunk, mine first.
    detail::gather_folded_chunks(g, h, reinterpret_cast<const T*>(s.current_half()), out + at, n);
    return true;
  });
}

template <ReduceOp Op, class Coop, class T>
APERTURE_HD bool all_reduce_direct(const Coop& g, const CollectiveHandle& h, const T* in, const std::int64_t* in_bases,
                                   T* out, std::uint64_t count) {
  // Writing `out` over `in` would change what peers still fold.
  return detail::direct_pieces<T>(
      g, h, count, detail::overlaps(in, count, out, count) ? detail::kNeedsStaged : detail::kDisjoint,
      detail::offset_in(in, in_bases, h.rank), [&](std::uint64_t at, std::uint64_t n) {
        detail::reduce_peers<Op>(g, out + at, in + at, n, h.rank, h.world_size, in_bases);
      },
      [&] { return all_reduce_one_shot<Op>(g, h, in, out, count); });
}

template <ReduceOp Op, class Coop, class T>
APERTURE_HD bool all_reduce_two_shot_direct(const Coop& g, const CollectiveHandle& h, const T* in,
                                            const std::int64_t* in_bases, T* out, std::uint64_t count) {
  // In place (in == out) is safe: a piece's input is read before its barrier and written after
  // it. Any other overlap would write over a piece peers have yet to fold.
  const bool overlapping = in != out && detail::overlaps(in, count, out, count);
  detail::Session<Coop> s(g, h);
  const detail::Layout layout = detail::agree_on_layout(s, overlapping ? detail::kNeedsStaged : detail::kDisjoint,
                                                        detail::offset_in(in, in_bases, h.rank));
  if (layout == detail::Layout::zero_copy) {
    detail::for_each_piece<T>(g, count, detail::piece_capacity<T>(h, 1), [&](std::uint64_t at, std::uint64_t n, bool) {
      // Reduce-scatter from every rank's input where it lies: my chunk of the piece, folded into
      // my staging, where it is the data of the next barrier (session.h's rule).
      const detail::Range chunk = detail::split<T>(n, h.world_size, h.rank);
      detail::reduce_peers<Op>(g, reinterpret_cast<T*>(s.next_half()) + chunk.begin, in + at + chunk.begin,
                               chunk.size(), h.rank, h.world_size, in_bases);
      if (!s.barrier()) return false;
      // All-gather: every rank's folded chunk, mine first.
      detail::gather_folded_chunks(g, h, reinterpret_cast<const T*>(s.current_half()), out + at, n);
      return true;
    });
  }
  return detail::finish_zero_copy(s, layout, [&] { return all_reduce_two_shot<Op>(g, h, in, out, count); });
}

template <ReduceOp Op, class Coop, class T>
APERTURE_HD bool all_reduce_ll(const Coop& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count) {
  return detail::ll_reduce<Op>(g, h, [in](int) { return in; }, out, count);
}

template <ReduceOp Op, class Coop, class T>
APERTURE_HD bool all_reduce(const Coop& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count,
                            bool two_shot) {
  return two_shot ? all_reduce_two_shot<Op>(g, h, in, out, count) : all_reduce_one_shot<Op>(g, h, in, out, count);
}

}  // namespace aperture::collectives
