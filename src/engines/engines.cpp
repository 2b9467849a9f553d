// src/engines/engines.cpp — which engine a provider's memory gets (engine.h), in MPI builds.

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "aperture/error.h"
#include "aperture/team.h"
#include "bootstrap/launched_by.h"
#include "bootstrap/mpi.h"
#include "common/env.h"
#include "common/format.h"
#include "engines/engine.h"
#include "engines/mpi_engines.h"

namespace aperture::detail {

EngineKind host_memory_engine_kind() { return env::engine_messages() ? EngineKind::messages : EngineKind::rma; }

std::string engine_unavailable(const Team& team) {
  if (team.node_count() <= 1) return "the job runs on one node";
  if (!mpi_knows_the_ranks(team))
    return detail::format("its ranks were started by {}, not by mpirun or `srun --mpi=pmix`: MPI, which reaches the "
                          "other nodes, needs ranks MPI knows (`aperture launch --mpi`, mpirun, or srun with PMIx)",
                          team.launched_by());
  if (!mpi_is_active()) return "MPI is not initialised (or already finalized) in this process";
  return {};
}

namespace {

// Both engines keep a thread of their own in MPI (the RMA engine's progress thread, the message
// engine's service thread). Every rank decides alike (the level is the job's), so no rank waits
// in the engine's first collective call alone.
void require_thread_multiple() {
  int thread_level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&thread_level);
  if (thread_level < MPI_THREAD_MULTIPLE)
    throw Error(ErrorCode::unavailable,
                "MPI runs below MPI_THREAD_MULTIPLE, and the engine that reaches ranks on other nodes keeps a "
                "thread of its own in MPI; initialise MPI with MPI_Init_thread(MPI_THREAD_MULTIPLE), or let "
                "aperture initialise it (Team::from_env before MPI_Init)");
}

}  // namespace

OpenEngine open_engine_over_host_memory(Team& team, void* local_base, std::size_t bytes) {
  // Read on every rank before anything collective: a bad value fails every rank alike.
  const RemoteEngineChoice choice =
      choose_remote_engine(MemoryKind::host, false, host_memory_engine_kind(), engine_unavailable(team));
  if (choice.engine == RemoteEngine::none) return {};
  require_thread_multiple();
  if (choice.engine == RemoteEngine::messages) return open_message_engine(team, host_target_memory(local_base), bytes);
  return open_rma_engine(team, local_base, bytes);
}

#if defined(APERTURE_WITH_CUDA)
OpenEngine open_engine_over_device_memory(Team& team, void* local_base, std::size_t bytes, int device) {
  const RemoteEngineChoice choice =
      choose_remote_engine(MemoryKind::device, false, EngineKind::messages, engine_unavailable(team));
  if (choice.engine == RemoteEngine::none) return {};
  require_thread_multiple();
  return open_message_engine(team, device_target_memory(local_base, device), bytes);
}
#endif

}  // namespace aperture::detail
