// aperture/collectives/barrier.h — every rank of the team reaches a point.
//
//     barrier(coop, h)     returns when every rank's same part (coop.meta_group_rank()) has
//                          called it; the group's writes before it are visible to every peer
//                          after it. False (on every thread) when a device wait gave up.
//
// The epoch barrier every collective is built on (detail/session.h): each thread 0..world-1
// signals one peer and waits for one; nothing is reset, so it is safe in a CUDA graph.
#pragma once

#include "aperture/collectives/detail/session.h"
#include "aperture/collectives/handle.h"
#include "aperture/config.h"

namespace aperture::collectives {

template <class Coop>
APERTURE_HD bool barrier(const Coop& g, const CollectiveHandle& h) {
  detail::Session<Coop> s(g, h);
  s.barrier();
  return s.finish();
}

}  // namespace aperture::collectives
