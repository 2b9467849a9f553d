// aperture/collectives/reduce_scatter.h — block r of the reduction lands on rank r.
//
//     reduce_scatter<Op>(g, h, in, out, count)   out[i] = in[me * count + i] of rank 0 (op) ... of rank world-1
//                                                (in holds world * count elements, out count)
//
// Per piece: copy every block's piece into its slot of this rank's staging, barrier, fold slot
// `me` of every rank, in rank order. In place (out == in + me * count) is allowed.
//
//     reduce_scatter_ll<Op>(g, h, in, out, count)   the same result with no barrier: each rank
//         pushes block d of its input into rank d's LL slot and folds what lands in its own
//         (ll.h). Small sizes.
#pragma once

#include <cstdint>

#include "aperture/collectives/barrier.h"
#include "aperture/collectives/bulk.h"
#include "aperture/collectives/ll.h"
#include "aperture/collectives/partition.h"

namespace aperture::collectives {

template <ReduceOp Op, class Group, class T>
APERTURE_HD bool reduce_scatter(const Group& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count) {
  Session<Group> s(g, h);
  const int me = h.rank;
  const auto w = static_cast<std::uint64_t>(h.world_size);
  const Range mine = split<T>(count, g.parts(), g.part());
  const std::uint64_t capacity = piece_capacity<T>(h, w);
  for (std::uint64_t at = mine.begin; at < mine.end; at += capacity) {
    const std::uint64_t n = mine.end - at < capacity ? mine.end - at : capacity;
    const std::uint64_t stride = slot_stride<T>(n);
    T* stage = reinterpret_cast<T*>(s.next_half());
    for (std::uint64_t d = 0; d < w; ++d) group_copy(g, stage + d * stride, in + d * count + at, n);
    if (!s.barrier()) break;
    const T* staged = reinterpret_cast<const T*>(s.current_half()) + static_cast<std::uint64_t>(me) * stride;
    group_reduce_peers<Op>(g, out + at, staged, n, me, h.world_size, h.peer_bases);
  }
  return s.finish();
}

template <ReduceOp Op, class Group, class T>
APERTURE_HD bool reduce_scatter_ll(const Group& g, const CollectiveHandle& h, const T* in, T* out,
                                   std::uint64_t count) {
  using A = Accumulate<T>;
  using Acc = typename A::type;
  constexpr std::uint64_t E = kLLElements<T>;
  Session<Group> s(g, h);
  const int me = h.rank;
  const int world = h.world_size;
  const T* own = in + static_cast<std::uint64_t>(me) * count;
  const bool own_aligned = ll_aligned(own);
  const bool out_aligned = ll_aligned(out);
  const Range mine = split<T>(count, g.parts(), g.part());
  const std::uint64_t capacity = ll_capacity<T>(h);
  for (std::uint64_t at = mine.begin; at < mine.end; at += capacity) {
    const std::uint64_t n = mine.end - at < capacity ? mine.end - at : capacity;
    const std::uint64_t lines = ll_lines<T>(n);
    LLPiece<Group> piece(s);
    for (int d = 1; d < world; ++d) {
      const int to = (me + d) % world;
      LLLine* dst = piece.remote_slot(to);
      const T* src = in + static_cast<std::uint64_t>(to) * count;
      const bool aligned = ll_aligned(src);
      for (std::uint64_t j = g.thread(); j < lines; j += g.threads())
        detail::ll_store(dst + j, ll_pack(src + at + j * E, ll_valid<T>(n, j), aligned), piece.flag);
    }
    // Line j of the own block is read and written by the same thread: in place is safe.
    for (std::uint64_t j = g.thread(); j < lines; j += g.threads()) {
      const std::uint64_t valid = ll_valid<T>(n, j);
      Acc acc[E] = {};
      for (int r = 0; r < world; ++r) {
        const std::uint64_t payload = r == me ? ll_pack(own + at + j * E, valid, own_aligned) : piece.receive(r, j);
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

}  // namespace aperture::collectives
