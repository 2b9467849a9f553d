// aperture/collectives/all_reduce.h — every rank gets the reduction of every rank's `in`.
//
//     all_reduce_one_shot<Op>(g, h, in, out, count)   one barrier per piece; each rank reads
//         every rank's piece and folds it: least latency, world x the reads. For small sizes.
//     all_reduce_two_shot<Op>(g, h, in, out, count)   two barriers per piece: rank c folds chunk
//         c of the piece (a reduce-scatter), then every rank gets every chunk (an all-gather):
//         each rank reads about 2x the piece, whatever the world size. For large sizes.
//     all_reduce_ll<Op>(g, h, in, out, count)         no barrier: each rank pushes its data with
//         an epoch flag into every peer's LL slot and folds what lands in its own memory (ll.h):
//         one NVLink trip per call, 2x the bytes on the wire. For the smallest sizes.
//     all_reduce<Op>(g, h, in, out, count, two_shot)  one of the first two
//
// out[i] = in[i] of rank 0 (op) in[i] of rank 1 (op) ... of rank world-1, in rank order on every
// rank, so every rank's result is bit-identical, whichever algorithm ran. In place (in == out)
// is allowed. The host entry (aperture::Communicator::all_reduce) chooses by size.
#pragma once

#include <cstdint>

#include "aperture/collectives/barrier.h"
#include "aperture/collectives/bulk.h"
#include "aperture/collectives/ll.h"
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
APERTURE_HD bool all_reduce_ll(const Group& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count) {
  using A = Accumulate<T>;
  using Acc = typename A::type;
  constexpr std::uint64_t E = kLLElements<T>;
  Session<Group> s(g, h);
  const int me = h.rank;
  const int world = h.world_size;
  const bool in_aligned = ll_aligned(in);
  const bool out_aligned = ll_aligned(out);
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
    // Line j is pushed and folded by the same thread, so in place (in == out) is safe.
    for (std::uint64_t j = g.thread(); j < lines; j += g.threads()) {
      const std::uint64_t valid = ll_valid<T>(n, j);
      Acc acc[E] = {};
      for (int r = 0; r < world; ++r) {
        const std::uint64_t payload = r == me ? ll_pack(in + at + j * E, valid, in_aligned) : piece.receive(r, j);
        T x[E];
        memcpy(static_cast<void*>(x), &payload, sizeof payload);
        for (std::uint64_t k = 0; k < E; ++k) acc[k] = r == 0 ? A::in(x[k]) : Combine<Op>::apply(acc[k], A::in(x[k]));
      }
      T result[E];
      for (std::uint64_t k = 0; k < E; ++k) result[k] = A::out(acc[k]);
      std::uint64_t packed = 0;
      memcpy(&packed, static_cast<const void*>(result), sizeof packed);
      ll_unpack(out + at + j * E, packed, valid, out_aligned);
    }
    if (!piece.done(at + capacity < mine.end)) break;
  }
  return s.finish();
}

template <ReduceOp Op, class Group, class T>
APERTURE_HD bool all_reduce(const Group& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count,
                            bool two_shot) {
  return two_shot ? all_reduce_two_shot<Op>(g, h, in, out, count) : all_reduce_one_shot<Op>(g, h, in, out, count);
}

}  // namespace aperture::collectives
