// src/engines/engine.h — the engines that reach memory on other nodes: which one a range of
// memory gets, and how it is opened and closed. Providers hold one through EngineAttachment
// (engine_attachment.h), not directly.
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
// A third, for NVSHMEM's memory only: NVSHMEM's own host API (nvshmem_engine.h), which reaches a
// PE over NVSHMEM's transports wherever nvshmem_ptr says NULL, on one node or several, with no MPI.
//
// All are host engines in the sense that host threads carry the operations out; what differs is
// the memory they are opened over. An engine attaches only where it is needed and can work: the
// team spans more than one node and mpirun started the ranks. Otherwise opening gives an empty
// OpenEngine, closing it does nothing, and indirect peers stay refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "aperture/engine_channel.h"
#include "aperture/provider.h"

namespace aperture {
class Team;
struct SymmetricAddressMap;
}  // namespace aperture

namespace aperture::detail {

// An engine open over one range of this rank's memory (host or GPU), and what keeps it alive.
struct OpenEngine {
  EngineChannel channel;
  std::shared_ptr<const void> owner;
  void (*close)(OpenEngine&) = nullptr;  // the engine's own collective close
  explicit operator bool() const { return channel.attached(); }
  // The channel for a map whose copy starts `offset` bytes into the range.
  EngineChannel at(std::uint64_t offset) const {
    EngineChannel c = channel;
    c.base_offset += offset;
    return c;
  }
};

enum class EngineKind { rma, messages };
// APERTURE_ENGINE: which engine host memory takes (rma unless it says messages); GPU memory
// always takes the message engine.
EngineKind host_memory_engine_kind();

// Which engine reaches a provider's memory from the ranks its table does not reach directly.
enum class RemoteEngine {
  none,      // none opens (`why_none` says why): indirect peers stay refused
  rma,       // MPI one-sided communication (host memory)
  messages,  // MPI messages to the target's service thread (host memory, GPU memory by staging)
  nvshmem,   // the allocator's own transports (NVSHMEM's host API)
};
struct RemoteEngineChoice {
  RemoteEngine engine = RemoteEngine::none;
  std::string why_none;
};
// The one decision every provider's engine goes through (pure, so it is unit-tested):
//   memory               where the provider's memory lies;
//   allocator_transport  the allocator reaches its own peers (NVSHMEM): that path wins, on one
//                        node too, and needs no MPI;
//   host_kind            APERTURE_ENGINE, for host memory;
//   mpi_unavailable      engine_unavailable(team): "" when an MPI engine can open.
RemoteEngineChoice choose_remote_engine(MemoryKind memory, bool allocator_transport, EngineKind host_kind,
                                        std::string_view mpi_unavailable);
const char* remote_engine_name(RemoteEngine engine);

// Why no engine would open in this team, or "" when one will.
std::string engine_unavailable(const Team& team);
// Collective. Covers [local_base, local_base + bytes) of every rank's host memory with the
// engine APERTURE_ENGINE names; empty (and nothing collective happens) where
// engine_unavailable says why not.
OpenEngine open_engine_over_host_memory(Team& team, void* local_base, std::size_t bytes);
// Collective. The same over GPU memory of `device`: the message engine, through pinned staging
// (MPI builds with CUDA only).
OpenEngine open_engine_over_device_memory(Team& team, void* local_base, std::size_t bytes, int device);
// Collective. Closes whichever engine it is; the channel's copies refuse every operation from then on.
void close_engine(OpenEngine& engine);

}  // namespace aperture::detail
