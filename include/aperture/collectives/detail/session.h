// aperture/collectives/detail/session.h — one part's passage through one collective call.
//
// A Session reads the part's epoch when it starts, raises it by one at every barrier, and
// stores it back when it finishes. Its barrier:
//     every thread's writes of the group reach g.sync(); threads 0..world-1 each fence and
//     signal() one peer's flag(part, me) with the new epoch (release), then each waits (acquire)
//     on one peer's flag(part, peer) in its own memory; g.all() joins the waits.
// No host involvement and nothing reset: safe inside a CUDA graph, replayed any number of times.
//
// The staging rule every algorithm here follows (it is what makes reuse without a trailing
// barrier safe): data for barrier e lives in half(part, e); it is written after the barrier
// e-1 was passed (next_half()) and read by peers after barrier e, before they signal e+1
// (current_half()). A rank that passed barrier e+1 knows every peer has finished reading its
// half(e+1 - 2) = half(e-1), the one it writes next.
#pragma once

#include <cstdint>

#include "aperture/collectives/detail/tuning.h"
#include "aperture/collectives/handle.h"
#include "aperture/config.h"
#include "aperture/coop.h"
#include "aperture/signal.h"

namespace aperture::collectives::detail {

// This thread's wait for a peer's epoch. On a GPU a barrier's peer usually arrives within
// microseconds: poll flat out first (tuning.h), then wait bounded as the Coop does, giving up
// early where the host raises `cancel` (CollectiveHandle::cancel; read only between the Coop's
// backoff sleeps). On the host the Coop's own backoff already spins first.
template <class Coop>
APERTURE_HD bool wait_for_epoch(const Coop& g, const std::uint64_t* flag, std::uint64_t epoch, std::uint64_t timeout_ns,
                                const std::uint64_t* cancel) {
  APERTURE_IF_DEVICE_ELSE(
      (for (int spin = 0; spin < tuning::kBarrierSpins; ++spin)
         if (aperture::detail::load_acquire(flag) >= epoch) return true;),
      ())
  return g.wait(flag, epoch, timeout_ns, cancel);
}

template <class Coop>
struct Session {
  const Coop& g;
  const CollectiveHandle& h;
  int part;
  std::uint64_t epoch;  // the last barrier passed (read from h.epochs on every thread)
  bool ok = true;

  APERTURE_HD Session(const Coop& coop, const CollectiveHandle& handle)
      : g(coop),
        h(handle),
        part(static_cast<int>(coop.meta_group_rank())),
        epoch(handle.epochs[coop.meta_group_rank()]) {}

  // Staging this rank writes before the next barrier.
  APERTURE_HD unsigned char* next_half() const { return h.half(part, epoch + 1); }
  // Staging of the barrier just passed: what peers wrote before it (read through translate).
  APERTURE_HD unsigned char* current_half() const { return h.half(part, epoch); }

  // Announce the next epoch to every peer and wait until every peer has announced it too.
  // False (on every thread of the group) when a device wait gave up; the host throws instead.
  APERTURE_HD bool barrier() { return barrier_announcing(false, 0); }

  // barrier(), which also hands every peer `word` (when `announce`): it is stored beside the
  // epoch (CollectiveHandle::announcement) before the epoch's release, so a peer past the
  // barrier reads it with announced(). The cost: one more store per peer.
  APERTURE_HD bool barrier_announcing(bool announce, std::uint64_t word) {
    const std::uint64_t e = ++epoch;
    const int me = h.rank;
    const int world = h.world_size;
    g.sync();
    for (int peer = static_cast<int>(g.thread_rank()); peer < world; peer += static_cast<int>(g.size())) {
      if (peer == me) continue;
      if (announce) *aperture::translate(h.announcement(part, me, e), me, peer, h.peer_bases) = word;
      g.fence();
      aperture::signal(h.flag(part, me), e, me, peer, h.peer_bases);
    }
    bool waited = true;
    for (int peer = static_cast<int>(g.thread_rank()); peer < world; peer += static_cast<int>(g.size()))
      if (peer != me && !wait_for_epoch(g, h.flag(part, peer), e, h.timeout_ns, h.cancel)) waited = false;
    ok = g.all(waited) && ok;
    return ok;
  }

  // What `sender` announced with the barrier just passed (barrier_announcing). Valid until this
  // rank signals again: a peer's next announcement, of the next epoch, goes to the other word.
  APERTURE_HD std::uint64_t announced(int sender) const { return *h.announcement(part, sender, epoch); }

  // Stores the epoch back (all threads have read it at construction) and reports the outcome.
  // The last sync lets a kernel run another collective right after: its Session reads the epoch.
  APERTURE_HD bool finish() {
    g.sync();
    if (g.thread_rank() == 0) {
      h.epochs[part] = epoch;
      if (!ok && h.status != nullptr) *h.status = kStatusWaitGaveUp;
    }
    g.sync();
    return ok;
  }
};

}  // namespace aperture::collectives::detail
