// aperture/collectives/barrier.h — the epoch barrier every collective is built on.
//
// A Session is one part's (one group's) passage through one collective call: it reads the
// part's epoch when it starts, raises it by one at every barrier, and stores it back when it
// finishes. Its barrier:
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

#include "aperture/collectives/handle.h"
#include "aperture/config.h"
#include "aperture/signal.h"

namespace aperture::collectives {

template <class Group>
struct Session {
  const Group& g;
  const CollectiveHandle& h;
  int part;
  std::uint64_t epoch;  // the last barrier passed (read from h.epochs on every thread)
  bool ok = true;

  APERTURE_HD Session(const Group& group, const CollectiveHandle& handle)
      : g(group), h(handle), part(group.part()), epoch(handle.epochs[group.part()]) {}

  // Staging this rank writes before the next barrier.
  APERTURE_HD unsigned char* next_half() const { return h.half(part, epoch + 1); }
  // Staging of the barrier just passed: what peers wrote before it (read through translate).
  APERTURE_HD unsigned char* current_half() const { return h.half(part, epoch); }

  // Announce the next epoch to every peer and wait until every peer has announced it too.
  // False (on every thread of the group) when a device wait gave up; the host throws instead.
  APERTURE_HD bool barrier() {
    const std::uint64_t e = ++epoch;
    const int me = h.rank;
    const int world = h.world_size;
    g.sync();
    for (int peer = static_cast<int>(g.thread()); peer < world; peer += static_cast<int>(g.threads())) {
      if (peer == me) continue;
      g.fence();
      aperture::signal(h.flag(part, me), e, me, peer, h.peer_bases);
    }
    bool waited = true;
    for (int peer = static_cast<int>(g.thread()); peer < world; peer += static_cast<int>(g.threads()))
      if (peer != me && !g.wait(h.flag(part, peer), e, h.timeout_ns)) waited = false;
    ok = g.all(waited) && ok;
    return ok;
  }

  // Stores the epoch back (all threads have read it at construction) and reports the outcome.
  // The last sync lets a kernel run another collective right after: its Session reads the epoch.
  APERTURE_HD bool finish() {
    g.sync();
    if (g.thread() == 0) {
      h.epochs[part] = epoch;
      if (!ok && h.status != nullptr) *h.status = 1;
    }
    g.sync();
    return ok;
  }
};

// Every rank of the team reaches this point (each part with the same part of every other rank).
template <class Group>
APERTURE_HD bool barrier(const Group& g, const CollectiveHandle& h) {
  Session<Group> s(g, h);
  s.barrier();
  return s.finish();
}

}  // namespace aperture::collectives
