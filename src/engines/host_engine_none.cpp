// src/engines/host_engine_none.cpp — built without MPI: no engine, indirect peers stay refused.
#include "aperture/team.h"
#include "common/env.h"
#include "engines/host_engine.h"

namespace aperture::detail {

EngineKind host_engine_kind() { return env::engine_messages() ? EngineKind::messages : EngineKind::rma; }

std::string host_engine_unavailable(const Team& team) {
  if (team.node_count() <= 1) return "the job runs on one node";
  return "aperture was built without MPI, which reaches other nodes (install libopenmpi-dev and rebuild)";
}

HostEngine open_host_engine(Team&, void*, std::size_t) {
  (void)host_engine_kind();  // a bad APERTURE_ENGINE is refused here too
  return {};
}
HostEngine open_device_engine(Team&, void*, std::size_t, int) { return {}; }
void close_host_engine(HostEngine& engine) { engine = {}; }

}  // namespace aperture::detail
