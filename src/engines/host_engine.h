// src/engines/host_engine.h — the engines that reach memory on other nodes, as the providers
// open and close them.
//
// Two engines, both on MPI (the ranks must have been started by mpirun, so MPI knows them all):
//   rma       MPI one-sided communication on a window over each rank's copy (mpi_rma.cpp);
//             host memory only. The default for host memory.
//   messages  MPI send/receive to the target's service thread, which applies each operation to
//             its own memory itself (message_engine.cpp): host memory, and GPU memory through
//             pinned staging where the MPI is not CUDA-aware. APERTURE_ENGINE=messages picks it
//             for host memory too (an MPI whose one-sided components fail where two-sided
//             messages work; atomics that are atomic with the target node's direct ones).
//
// A provider opens an engine over memory it owns, on every rank (collective), puts
// `engine.at(offset)` into each map it makes of that memory, and closes the engine before the
// memory goes (collective too). An engine attaches only where it is needed and can work: the
// team spans more than one node and mpirun started the ranks. Otherwise both calls do nothing
// and indirect peers stay refused.
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
  void (*close)(HostEngine&) = nullptr;  // the engine's own collective close
  explicit operator bool() const { return channel.attached(); }
  // The channel for a map whose copy starts `offset` bytes into the range.
  EngineChannel at(std::uint64_t offset) const {
    EngineChannel c = channel;
    c.base_offset += offset;
    return c;
  }
};

enum class EngineKind { rma, messages };
// APERTURE_ENGINE: which engine host memory takes (rma unless it says messages).
EngineKind host_engine_kind();

// Why no engine would open in this team, or "" when one will.
std::string host_engine_unavailable(const Team& team);
// Collective. Covers [local_base, local_base + bytes) of every rank's host memory with the
// engine APERTURE_ENGINE names; empty (and nothing collective happens) where
// host_engine_unavailable says why not.
HostEngine open_host_engine(Team& team, void* local_base, std::size_t bytes);
// Collective. The same over GPU memory of `device`: the message engine, through pinned staging.
HostEngine open_device_engine(Team& team, void* local_base, std::size_t bytes, int device);
// Collective. Closes whichever engine it is; the channel's copies refuse every operation from then on.
void close_host_engine(HostEngine& engine);

}  // namespace aperture::detail
