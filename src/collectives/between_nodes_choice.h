// src/collectives/between_nodes_choice.h — what a team across nodes exchanges data between nodes
// on: MPI (host memory; GPU memory through pinned host staging) or NCCL (GPU memory, straight
// from and into the GPU buffers on the caller's stream). A pure function of the memory, the build
// and APERTURE_COLLECTIVES_BETWEEN_NODES, so that it is tested without a GPU or a job.
#pragma once

#include <string>

#include "aperture/error.h"
#include "aperture/provider.h"
#include "common/env.h"

namespace aperture::collectives::detail {

enum class BetweenNodes { mpi, nccl };

inline const char* between_nodes_name(BetweenNodes path) { return path == BetweenNodes::nccl ? "nccl" : "mpi"; }

// Host memory: MPI, whatever the variable says (NCCL moves GPU memory). GPU memory: NCCL when the
// variable says nccl, or auto with NCCL built in (the path that moves GPU buffers without host
// staging; it passed its GPU runs, gpu.collectives.*.nodes2.nccl.np2, on 2026-12-03); MPI when it
// says mpi, or auto without NCCL. nccl without NCCL built in is an error, not a quiet MPI.
inline BetweenNodes choose_between_nodes(MemoryKind memory, bool nccl_built, env::BetweenNodes setting) {
  if (memory != MemoryKind::device || setting == env::BetweenNodes::mpi) return BetweenNodes::mpi;
  if (nccl_built) return BetweenNodes::nccl;
  if (setting == env::BetweenNodes::automatic) return BetweenNodes::mpi;
  throw Error(ErrorCode::unavailable,
              "Communicator (across nodes): APERTURE_COLLECTIVES_BETWEEN_NODES=nccl, but aperture_collectives was "
              "built without NCCL; rebuild with NCCL 2.28+ found (NCCL_HOME, or the nvidia-nccl wheel), or set "
              "APERTURE_COLLECTIVES_BETWEEN_NODES=mpi (or auto)");
}

}  // namespace aperture::collectives::detail
