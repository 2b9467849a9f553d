// aperture/collectives/broadcast.h — root's `in` lands in every rank's `out`.
//
//     broadcast(g, h, in, out, count, root)     out[i] = in[i] of rank root (in read on root only)
//
// Per piece: root copies its piece into its staging, barrier, every other rank gets it from
// root's staging. In place (in == out on root) is allowed. Every rank calls it with the same
// count and root; every thread of the group calls it.
//
//     broadcast_ll(g, h, in, out, count, root)  the same result on the push path: root stores its
//         piece as LL lines (detail/ll.h) into every peer's broadcast slot and goes on; each peer
//         polls its own slot, clears it and acknowledges the piece to root. Root waits for no
//         one but, before it reuses a slot of its ring (tuning::kHostBroadcastLLDepth slots),
//         for the acknowledgement of the piece that last used it (depth pieces back when it
//         roots every call): an eager broadcast that may run that many calls ahead. Its own epochs, slots and acknowledgements (handle.h's broadcast_*),
//         so it leaves the other collectives' epoch chain alone; the safety argument is in
//         detail/ll.h. Host memory only (the Communicator allocates the slots only there).
//
//     broadcast_direct(g, h, in, in_bases, out, count, root)   the same result, zero-copy: `in`
//         is symmetric (in_bases: its own peer table; the same offset on every rank, checked), and
//         every other rank reads root's where it lies while root copies its own into `out` (nothing
//         when in place): one copy per rank, all at once, between two barriers. Only root's `in` is read, so only
//         root's layout counts: root announces it at the first barrier, and where its `out`
//         overlaps its `in` other than in place (which no broadcast can take: root's copy would
//         overwrite what peers still read) every rank returns false with kStatusRootOverlaps in
//         its status words, and the host raises aperture::Error from it. Each rank reads root's
//         `in` at its own offset, so every rank announces that offset too, and where one is not
//         root's every rank returns false with kStatusOffsetsDiffer (the ranks that differ from
//         root), before anything moves.
#pragma once

#include <cstdint>

#include "aperture/collectives/detail/ll.h"
#include "aperture/collectives/detail/partition.h"
#include "aperture/collectives/detail/reduce.h"
#include "aperture/collectives/detail/staged.h"
#include "aperture/collectives/handle.h"
#include "aperture/coop_rma.h"
#include "aperture/signal.h"

namespace aperture::collectives {

template <class Coop, class T>
APERTURE_HD bool broadcast(const Coop& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count,
                           int root) {
  const int me = h.rank;
  return detail::staged_pieces<T>(g, h, count, 1, [&](detail::Session<Coop>& s, std::uint64_t at, std::uint64_t n) {
    if (me == root) aperture::copy(g, reinterpret_cast<T*>(s.next_half()), in + at, n);
    if (!s.barrier()) return false;
    if (me == root) {
      // From the staging just written (in this core's cache), not from `in` again.
      if (out != in) aperture::copy(g, out + at, reinterpret_cast<const T*>(s.current_half()), n);
    } else {
      aperture::get(g, out + at, reinterpret_cast<const T*>(s.current_half()), n, me, root, h.peer_bases);
    }
    return true;
  });
}

template <class Coop, class T>
APERTURE_HD bool broadcast_ll(const Coop& g, const CollectiveHandle& h, const T* in, T* out, std::uint64_t count,
                              int root) {
  using detail::LLLine;
  constexpr std::uint64_t E = detail::kLLElements<T>;
  const int me = h.rank;
  const int part = static_cast<int>(g.meta_group_rank());
  std::uint64_t* state = h.broadcast_state_of(part);
  // Read by every thread here; stored back by thread 0 after the last sync below.
  std::uint64_t piece = state[0];
  std::uint64_t* last_rooted = state + 1;  // [ring slot]: written by thread 0 only, after a sync
  const bool src_aligned = detail::ll_aligned(in);
  const bool out_aligned = detail::ll_aligned(out);
  bool ok = true;
  constexpr std::uint64_t V = detail::kVectorElements<T>;
  const std::uint64_t capacity = h.broadcast_slot_bytes / detail::kLLLineBytes * E / V * V;
  detail::for_each_piece<T>(g, count, capacity > 0 ? capacity : V, [&](std::uint64_t at, std::uint64_t n, bool) {
    const std::uint64_t b = ++piece;
    const std::uint32_t flag = detail::ll_flag(b);
    const std::uint64_t lines = detail::ll_lines<T>(n);
    if (me == root) {
      // Every peer has cleared this ring slot for us: the last piece we stored there.
      const std::uint64_t ring = b % h.broadcast_depth;
      const std::uint64_t last = last_rooted[ring];
      bool waited = true;
      for (int peer = static_cast<int>(g.thread_rank()); peer < h.world_size; peer += static_cast<int>(g.size()))
        if (peer != me && !g.wait(h.broadcast_ack(part, peer), last, h.timeout_ns, h.cancel)) waited = false;
      ok = g.all(waited) && ok;
      if (!ok) return false;
      auto* mine = reinterpret_cast<LLLine*>(h.broadcast_slot(part, b, me));
      for (int d = 1; d < h.world_size; ++d) {
        const int to = (me + d) % h.world_size;
        LLLine* dst = aperture::translate(mine, me, to, h.peer_bases);
        for (std::uint64_t j = g.thread_rank(); j < lines; j += g.size())
          detail::ll_store(dst + j, detail::ll_pack(in + at + j * E, detail::ll_valid<T>(n, j), src_aligned), flag);
      }
      if (out != in) aperture::copy(g, out + at, in + at, n);
      g.sync();  // every thread has read last_rooted[ring]
      if (g.thread_rank() == 0) last_rooted[ring] = b;
      return true;
    }
    auto* slot = reinterpret_cast<LLLine*>(h.broadcast_slot(part, b, root));
    bool received = true;
    for (std::uint64_t j = g.thread_rank(); j < lines; j += g.size()) {
      std::uint64_t payload = 0;
      if (received && !detail::ll_receive(slot + j, flag, h.timeout_ns, h.cancel, payload)) received = false;
      detail::ll_unpack(out + at + j * E, payload, detail::ll_valid<T>(n, j), out_aligned);
    }
    // Every thread's clears, then the fence, then the acknowledgement (detail/ll.h).
    ok = g.all(received) && ok;
    if (!ok) return false;
    if (g.thread_rank() == 0) {
      g.fence();
      aperture::signal(h.broadcast_ack(part, me), b, me, root, h.peer_bases);
    }
    return true;
  });
  g.sync();
  if (g.thread_rank() == 0) {
    state[0] = piece;
    if (!ok && h.status != nullptr) *h.status = kStatusWaitGaveUp;
  }
  g.sync();
  return ok;
}

template <class Coop, class T>
APERTURE_HD bool broadcast_direct(const Coop& g, const CollectiveHandle& h, const T* in, const std::int64_t* in_bases,
                                  T* out, std::uint64_t count, int root) {
  const int me = h.rank;
  const bool root_overlaps = me == root && in != out && detail::overlaps(in, count, out, count);
  detail::Session<Coop> s(g, h);
  const std::uint64_t mine = detail::announcement_of(root_overlaps ? detail::kNeedsStaged : detail::kDisjoint,
                                                     detail::offset_in(in, in_bases, me));
  bool ok = s.barrier_announcing(true, mine);
  if (ok) {
    // Every rank decides alike, from the same announcements, before anything moves.
    const auto word = [&](int rank) { return rank == me ? mine : s.announced(rank); };
    const std::uint64_t root_offset = detail::read_offset_of(word(root));
    bool offset_alike = true;
    for (int r = static_cast<int>(g.thread_rank()); r < h.world_size; r += static_cast<int>(g.size()))
      if (detail::read_offset_of(word(r)) != root_offset) offset_alike = false;
    const bool offsets_alike = g.all(offset_alike);
    if (detail::layout_of(word(root)) == detail::kNeedsStaged) {
      if (g.thread_rank() == 0 && h.status != nullptr) {
        h.status[1] = static_cast<std::uint64_t>(root);
        h.status[0] = kStatusRootOverlaps;
      }
      s.finish();
      return false;
    }
    if (!offsets_alike) {
      detail::record_ranks(g, h, kStatusOffsetsDiffer,
                           [&](int r) { return detail::read_offset_of(word(r)) != root_offset; });
      s.finish();
      return false;
    }
  }
  if (ok) {
    detail::read_in_place<T>(s, count, [&](std::uint64_t at, std::uint64_t n) {
      if (me != root) {
        aperture::get(g, out + at, in + at, n, me, root, in_bases);
      } else if (out != in) {
        aperture::copy(g, out + at, in + at, n);
      }
    });
  }
  return s.finish() && ok;
}

}  // namespace aperture::collectives
