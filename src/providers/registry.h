// src/providers/registry.h — how each provider plugs into make_provider and `aperture info`.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "aperture/provider.h"
#include "aperture/team.h"

namespace aperture::detail {

struct ProviderEntry {
  std::string name;
  // Whether it can run here now and why not; must not need a Team (it is asked before one exists).
  std::function<ProviderStatus()> status;
  // Builds the provider; collective over `team`. Throws aperture::Error when it cannot.
  std::function<std::unique_ptr<Provider>(Team& team)> make;
};

// Defined next to each provider. A provider not compiled in still has an entry whose status
// says why (e.g. "built without MPI"), so `aperture info` lists every known name.
ProviderEntry shm_entry();
ProviderEntry mpi_window_entry();
ProviderEntry openshmem_entry();
ProviderEntry cuda_ipc_entry();
ProviderEntry cuda_vmm_entry();
ProviderEntry nvshmem_entry();
ProviderEntry nccl_entry();

// An entry for a provider this build left out, with the reason.
ProviderEntry not_compiled_entry(const std::string& name, const std::string& reason);

// Checks `alignment` is a power of two and the arithmetic of bytes + alignment cannot
// overflow; throws aperture::Error naming the provider and the value otherwise.
void check_allocation_request(std::string_view provider, std::size_t bytes, std::size_t alignment);

}  // namespace aperture::detail
