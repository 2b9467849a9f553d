// src/collectives/run_collective.h — run_collective<K, Op, T>(g, h, c): the algorithm of kind K
// (its row's call, collective_kinds.h) on one Coop, the same template on the CPU (host.cpp,
// host_reduce.inc: aperture::CoopHost) and in the kernels (device_kernels.cuh: one CUDA block).
// T is the element type the buffers c.in and c.out hold; Op matters to the reductions only.
#pragma once

#include "aperture/collectives/all_gather.h"
#include "aperture/collectives/all_reduce.h"
#include "aperture/collectives/all_to_all.h"
#include "aperture/collectives/barrier.h"
#include "aperture/collectives/broadcast.h"
#include "aperture/collectives/reduce_scatter.h"
#include "aperture/config.h"
#include "dispatch.h"

namespace aperture::collectives::detail {

template <Kind K, ReduceOp Op, class T, class Coop>
APERTURE_HD void run_collective(const Coop& g, const CollectiveHandle& h, const Call& c) {
  [[maybe_unused]] const T* in = static_cast<const T*>(c.in);
  [[maybe_unused]] T* out = static_cast<T*>(c.out);
// NOLINTBEGIN(bugprone-macro-parentheses): `call` is a statement, not an expression
#define APERTURE_KIND_CALL(kind, shape, path, gpu, label, call) \
  if constexpr (K == Kind::kind) call;
// NOLINTEND(bugprone-macro-parentheses)
  APERTURE_COLLECTIVE_KINDS(APERTURE_KIND_CALL)
#undef APERTURE_KIND_CALL
}

}  // namespace aperture::collectives::detail
