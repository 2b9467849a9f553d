// src/launcher/node_place.cpp — rank blocks per node (node_place.h).
#include "node_place.h"

#include "common/env.h"  // node_of_block

namespace aperture::launcher {

NodePlace node_place(int rank, int ranks, int nodes) {
  NodePlace place;
  place.node = env::node_of_block(rank, ranks, nodes);
  for (int r = 0; r < ranks; ++r) {
    if (env::node_of_block(r, ranks, nodes) != place.node) continue;
    if (r < rank) ++place.local_rank;
    ++place.local_size;
  }
  return place;
}

}  // namespace aperture::launcher
