// src/engines/host_engine_none.cpp — built without MPI: no engine, indirect peers stay refused.
#include "engines/host_engine.h"

#include "aperture/team.h"

namespace aperture::detail {

std::string host_engine_unavailable(const Team& team) {
  if (team.node_count() <= 1) return "the job runs on one node";
  return "aperture was built without MPI, whose one-sided communication reaches other nodes (install "
         "libopenmpi-dev and rebuild)";
}

HostEngine open_host_engine(Team&, void*, std::size_t) { return {}; }
void close_host_engine(HostEngine& engine) { engine = {}; }

}  // namespace aperture::detail
