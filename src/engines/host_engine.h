// src/engines/host_engine.h — the engine that reaches host memory on other nodes: MPI one-sided
// communication (mpi_rma.cpp).
//
// A host provider opens an engine over memory it owns, on every rank (it is collective:
// MPI_Win_create), puts `engine.at(offset)` into each map it makes of that memory, and closes
// the engine before the memory goes (MPI_Win_free, collective too). The engine attaches only where it is needed and can
// work: the team spans more than one node and mpirun started the ranks (MPI must know them
// all). Otherwise both calls do nothing and indirect peers stay refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "aperture/engine_channel.h"

namespace aperture {
class Team;
struct SymmetricAddressMap;
}  // namespace aperture

namespace aperture::detail {

// An open engine over one range of this rank's memory, and what keeps it alive.
struct HostEngine {
  EngineChannel channel;
  std::shared_ptr<const void> owner;
  explicit operator bool() const { return channel.attached(); }
  // The channel for a map whose copy starts `offset` bytes into the range.
  EngineChannel at(std::uint64_t offset) const {
    EngineChannel c = channel;
    c.base_offset += offset;
    return c;
  }
};

// Why the engine would not open in this team, or "" when it will.
std::string host_engine_unavailable(const Team& team);
// Collective. Covers [local_base, local_base + bytes) of every rank with an MPI window; empty
// (and nothing collective happens) where host_engine_unavailable says why not.
HostEngine open_host_engine(Team& team, void* local_base, std::size_t bytes);
// Collective. Releases the window; the channel's copies refuse every operation from then on.
void close_host_engine(HostEngine& engine);

}  // namespace aperture::detail
