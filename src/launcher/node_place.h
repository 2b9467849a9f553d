// src/launcher/node_place.h — where a rank runs when `aperture launch --nodes K` splits the job
// into nodes: rank blocks, as the Team reads APERTURE_NODES (common/env.h's node_of_block). Both
// ways of starting ranks (local and through mpirun's rank shim) give each rank its node's local
// rank and size from here, so that what a rank reads before any Team exists (a provider's
// status(): may these ranks share a GPU?) agrees with what its Team computes.
//
// Private to src/launcher.
#pragma once

namespace aperture::launcher {

struct NodePlace {
  int node = 0;
  int local_rank = 0;  // among the ranks of its node
  int local_size = 0;  // ranks on its node
};

// Where rank `rank` of `ranks` runs, over `nodes` nodes (1 <= nodes <= ranks).
NodePlace node_place(int rank, int ranks, int nodes);

}  // namespace aperture::launcher
