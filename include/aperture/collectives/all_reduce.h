// aperture/collectives/all_reduce.h — every rank gets the reduction of every rank's `in`.
//
//     all_reduce_one_shot<Op>(g, h, in, out, count)   one barrier per piece; each rank reads
//         every rank's piece and folds it: least latency, world x the reads. For small sizes.
//     all_reduce_two_shot<Op>(g, h, in, out, count)   two barriers per piece: rank c folds chunk
//         c of the piece (a reduce-scatter), then every rank gets every chunk (an all-gather):
//         each rank reads about 2x the piece, whatever the world size. For large sizes.
//     all_reduce<Op>(g, h, in, out, count, two_shot)  one of them
//
// out[i] = in[i] of rank 0 (op) in[i] of rank 1 (op) ... of rank world-1, in rank order on every
// rank, so every rank's result is bit-identical, whichever algorithm ran. In place (in == out)
// is allowed. The host entry (aperture::Communicator::all_reduce) chooses by size.
#pragma once

#include <cstdint>

#include "aperture/collectives/barrier.h"
#include "aperture/collectives/bulk.h"
#include "aperture/collectives/partition.h"

namespace aperture::collectives {

template <ReduceOp Op, class Group, class T>
APERTURE_HD bool all_reduce_one_shot(const Group& g, const CollectiveHandle& h, const T* in, T* out,
                                     std::uint64_t count) {
  Session<Group> s(g, h);
  const int me = h.rank;
  const Range mine = split<T>(count, g.parts(), g.part());
  const std::uint64_t capacity = piece_capacity<T>(h, 1);
  for (std::uint64_t at = mine.begin; at < mine.end; at += capacity) {
    const std::uint64_t n = mine.end - at < capacity ? mine.end - at : capacity;
    group_copy(g, reinterpret_cast<T*>(s.next_half()), in + at, n);
    if (!s.barrier()) break;
    group_reduce_peers<Op>(g, out + at, reinterpret_cast<const T*>(s.current_half()), n, me, h.world_size,
                           h.peer_bases);
  }
  return s.finish();
}

template <ReduceOp Op, class Group, class T>
APERTURE_HD bool all_reduce_two_shot(const Group& g, const CollectiveHandle& h, const T* in, T* out,
                                     std::uint64_t count) {
  Session<Group> s(g, h);
  const int me = h.rank;
  const int world = h.world_size;
  const Range mine = split<T>(count, g.parts(), g.part());
  const std::uint64_t capacity = piece_capacity<T>(h, 1);
  for (std::uint64_t at = mine.begin; at < mine.end; at += capacity) {
    const std::uint64_t n = mine.end - at < capacity ? mine.end - at : capacity;
    group_copy(g, reinterpret_cast<T*>(s.next_half()), in + at, n);
    if (!s.barrier()) break;
    // Reduce-scatter: fold my chunk of every rank's piece into the other half, where it is the
    // data of the next barrier.
    const Range chunk = split<T>(n, world, me);
    const T* staged = reinterpret_cast<const T*>(s.current_half());
    T* reduced = reinterpret_cast<T*>(s.next_half());
    group_reduce_peers<Op>(g, reduced + chunk.begin, staged + chunk.begin, chunk.size(), me, world, h.peer_bases);
    if (!s.barrier()) break;
    // All-gather: every rank's folded chunk, mine first.
    const T* folded = reinterpret_cast<const T*>(s.current_half());
    for (int j = 0; j < world; ++j) {
      const int from = (me + j) % world;
      const Range c = split<T>(n, world, from);
      group_get(g, out + at + c.begin, folded + c.begin, c.size(), me, from, h.peer_bases);
    }
  }
  return s.finish();
}

template <ReduceOp Op, class Group, class T>
APERTURE_HD bool all_reduce(const Group& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count,
                            bool two_shot) {
  return two_shot ? all_reduce_two_shot<Op>(g, h, in, out, count) : all_reduce_one_shot<Op>(g, h, in, out, count);
}

}  // namespace aperture::collectives
