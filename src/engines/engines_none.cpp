// src/engines/engines_none.cpp — built without MPI: no engine, indirect peers stay refused.
#include "aperture/team.h"
#include "common/env.h"
#include "engines/engine.h"

namespace aperture::detail {

EngineKind host_memory_engine_kind() { return env::engine_messages() ? EngineKind::messages : EngineKind::rma; }

std::string engine_unavailable(const Team& team) {
  if (team.node_count() <= 1) return "the job runs on one node";
  return "aperture was built without MPI, which reaches other nodes (install libopenmpi-dev and rebuild)";
}

OpenEngine open_engine_over_host_memory(Team&, void*, std::size_t) {
  (void)host_memory_engine_kind();  // a bad APERTURE_ENGINE is refused here too
  return {};
}
OpenEngine open_engine_over_device_memory(Team&, void*, std::size_t, int) { return {}; }

}  // namespace aperture::detail
