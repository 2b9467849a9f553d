#include "providers/registry.h"

#include <bit>

#include "aperture/error.h"
#include "common/format.h"

namespace aperture {

namespace detail {

ProviderEntry not_compiled_entry(const std::string& name, const std::string& reason) {
  ProviderEntry entry;
  entry.name = name;
  entry.status = [name, reason] { return ProviderStatus{name, false, false, reason}; };
  entry.make = [name, reason](Team&) -> std::unique_ptr<Provider> {
    throw Error(ErrorCode::unavailable, detail::format("provider '{}' cannot run here: {}", name, reason));
  };
  return entry;
}

void check_allocation_request(std::string_view provider, std::size_t bytes, std::size_t alignment) {
  if (alignment == 0 || !std::has_single_bit(alignment))
    throw Error(ErrorCode::invalid_argument,
                detail::format("{} allocate: alignment {} is not a power of two; pass e.g. 256", provider, alignment));
  if (bytes > (std::size_t{1} << 48))
    throw Error(ErrorCode::invalid_argument,
                detail::format("{} allocate: {} bytes is larger than any machine's memory; check the size computation",
                               provider, bytes));
}

namespace {

std::vector<ProviderEntry> all_entries() {
  std::vector<ProviderEntry> entries;
  entries.push_back(shm_entry());
#if APERTURE_WITH_MPI
  entries.push_back(mpi_window_entry());
#else
  entries.push_back(not_compiled_entry("mpi-window", "aperture was built without MPI (install libopenmpi-dev and rebuild)"));
#endif
#if APERTURE_WITH_OPENSHMEM
  entries.push_back(openshmem_entry());
#else
  entries.push_back(not_compiled_entry(
      "openshmem", "aperture was built without OpenSHMEM (install libopenmpi-dev, which ships oshmem, and rebuild)"));
#endif
#if APERTURE_WITH_CUDA
  entries.push_back(cuda_ipc_entry());
#else
  entries.push_back(not_compiled_entry(
      "cuda-ipc", "aperture was built without CUDA (no nvcc found; put nvcc on PATH or configure with -DAPERTURE_CUDA=ON)"));
#endif
#if APERTURE_WITH_CUDA_VMM
  entries.push_back(cuda_vmm_entry());
#else
  entries.push_back(not_compiled_entry(
      "cuda-vmm", "aperture was built without CUDA (no nvcc found; put nvcc on PATH or configure with -DAPERTURE_CUDA=ON)"));
#endif
#if APERTURE_WITH_NVSHMEM
  entries.push_back(nvshmem_entry());
#else
  entries.push_back(not_compiled_entry(
      "nvshmem", "aperture was built without NVSHMEM (configure needs CUDA and NVSHMEM 3: set NVSHMEM_HOME or "
                 "`pip install nvidia-nvshmem-cu13==3.4.5`, then reconfigure)"));
#endif
#if APERTURE_WITH_NCCL
  entries.push_back(nccl_entry());
#else
  entries.push_back(not_compiled_entry(
      "nccl", "aperture was built without NCCL 2.28+ (configure needs CUDA and NCCL's nccl.h and nccl_device.h: set "
              "NCCL_HOME or `pip install nvidia-nccl-cu13`, then reconfigure)"));
#endif
  return entries;
}

const std::vector<ProviderEntry>& entries() {
  static const std::vector<ProviderEntry> registry = all_entries();
  return registry;
}

}  // namespace
}  // namespace detail

// A GPU provider where a GPU is usable, shm otherwise. make_provider compares the resolved name
// across ranks, so ranks that see different machines fail together instead of mixing providers.
std::string default_provider_name() {
  for (const auto& entry : detail::entries())
    if (entry.name == "cuda-ipc" && entry.status().available) return "cuda-ipc";
  return "shm";
}

std::vector<ProviderStatus> provider_statuses() {
  std::vector<ProviderStatus> statuses;
  for (const auto& entry : detail::entries()) statuses.push_back(entry.status());
  return statuses;
}

std::vector<std::string> available_providers() {
  std::vector<std::string> names;
  for (const auto& status : provider_statuses())
    if (status.available) names.push_back(status.name);
  return names;
}

std::unique_ptr<Provider> make_provider(std::string_view requested, Team& team) {
  const std::string name = requested == "default" ? default_provider_name() : std::string(requested);
  const detail::ProviderEntry* found = nullptr;
  for (const auto& entry : detail::entries())
    if (entry.name == name) found = &entry;
  const ProviderStatus status = found ? found->status() : ProviderStatus{name, false, false, {}};
  // Every rank must build the same provider, and find it equally usable: a rank that cannot run
  // it fails every rank here, instead of leaving the others waiting inside the provider's set-up.
  try {
    team.check_same("make_provider(" + name + ")",
                    {{"known", found != nullptr ? 1 : 0}, {"available", status.available ? 1 : 0}});
  } catch (const Error& mismatch) {
    if (found == nullptr || status.available) throw;
    throw Error(mismatch.code(), detail::format("{}\nOn this rank (rank {}) provider '{}' is not available: {}",
                                                mismatch.detail(), team.rank(), name, status.reason));
  }
  if (found != nullptr) {
    if (!status.available)
      throw Error(ErrorCode::unavailable,
                  detail::format("provider '{}' is not available here: {}", name, status.reason));
    return found->make(team);
  }
  std::string available;
  for (const auto& n : available_providers()) available += (available.empty() ? "" : ", ") + n;
  throw Error(ErrorCode::invalid_argument,
              detail::format("unknown provider '{}'; available here: {} (and \"default\"); `aperture info` lists every "
                             "provider with the reason it is or is not available",
                             name, available.empty() ? "none" : available));
}

}  // namespace aperture
