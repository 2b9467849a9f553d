// src/engines/engine_choice.cpp — which engine a provider's memory gets (engine.h), built in
// every configuration: the MPI builds and the build without MPI decide alike.
#include "engines/engine.h"

namespace aperture::detail {

RemoteEngineChoice choose_remote_engine(MemoryKind memory, bool allocator_transport, EngineKind host_kind,
                                        std::string_view mpi_unavailable) {
  if (allocator_transport) return {RemoteEngine::nvshmem, {}};
  if (!mpi_unavailable.empty()) return {RemoteEngine::none, std::string(mpi_unavailable)};
  // MPI one-sided windows over GPU memory need a CUDA-aware MPI; messages through pinned
  // staging need none.
  if (memory == MemoryKind::device) return {RemoteEngine::messages, {}};
  return {host_kind == EngineKind::messages ? RemoteEngine::messages : RemoteEngine::rma, {}};
}

const char* remote_engine_name(RemoteEngine engine) {
  switch (engine) {
    case RemoteEngine::none: return "none";
    case RemoteEngine::rma: return "rma";
    case RemoteEngine::messages: return "messages";
    case RemoteEngine::nvshmem: return "nvshmem";
  }
  return "unknown";
}

// With or without MPI: an engine knows how it closes (a test's engine, NVSHMEM's, MPI's).
void close_engine(OpenEngine& engine) {
  if (engine.close == nullptr) {
    engine = {};
    return;
  }
  engine.close(engine);
}

}  // namespace aperture::detail
