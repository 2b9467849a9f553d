// aperture/provider.h — whoever allocated the memory, seen through one interface.
//
// A provider owns symmetric memory (our own heaps, MPI windows, OpenSHMEM, NVSHMEM, NCCL, ...)
// and owes exactly one thing per allocation: the table of peer bases in a SymmetricAddressMap.
// The device operations never know which provider they run on.
//
// Calls marked "collective" must be made by every rank of the team, in the same order, with the
// same arguments; a mismatch throws aperture::Error on every rank instead of corrupting memory.
// A provider keeps a reference to its Team: the Team must outlive it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "aperture/address_map.h"
#include "aperture/export.h"

namespace aperture {

class Team;

enum class MemoryKind { host, device };

class APERTURE_API Provider {
 public:
  virtual ~Provider() = default;
  Provider() = default;
  Provider(const Provider&) = delete;
  Provider& operator=(const Provider&) = delete;

  virtual std::string_view name() const = 0;
  // Where its memory lives: host memory (CPU code reads it) or device memory (kernels read it).
  virtual MemoryKind memory_kind() const = 0;
  // True when one table serves every allocation (the whole heap is mapped linearly per peer).
  virtual bool is_linear() const = 0;

  // Collective. `bytes` may be 0 (a valid, empty allocation with its own address); `alignment`
  // must be a power of two. Throws aperture::Error when the memory cannot be had.
  virtual Allocation allocate(std::size_t bytes, std::size_t alignment = 256) = 0;
  // Collective. Releases an allocation of this provider and resets it; freeing twice, or freeing
  // another provider's allocation, throws aperture::Error.
  virtual void free(Allocation& allocation) = 0;
  // Describes memory this provider already owns: a view into one of its allocations, or a
  // buffer it allocated by other means. Not collective. Throws when it does not own the range.
  virtual SymmetricAddressMap symmetric_address_map(const void* ptr, std::size_t bytes) const = 0;
};

// One provider's standing on this machine now.
struct ProviderStatus {
  std::string name;
  bool compiled_in = false;
  bool available = false;
  std::string reason;  // why it is not available, or what it runs on when it is
};

// "default", "shm", "mpi-window", "openshmem", "cuda-ipc", "cuda-vmm", "nvshmem", "nccl".
// Collective: every rank must ask for the same name. Unknown names throw an error listing the
// available providers; known providers that cannot run here throw saying why.
APERTURE_API std::unique_ptr<Provider> make_provider(std::string_view name, Team& team);

// Names of the providers compiled in AND usable on this machine now.
APERTURE_API std::vector<std::string> available_providers();
// Every known provider with its standing, for `aperture info` and skipped tests.
APERTURE_API std::vector<ProviderStatus> provider_statuses();
// The provider "default" stands for here: shm without a GPU, a CUDA provider with one.
APERTURE_API std::string default_provider_name();

}  // namespace aperture
