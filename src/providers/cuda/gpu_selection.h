// src/providers/cuda/gpu_selection.h — which GPU a rank uses, decided the same way by every GPU
// provider.
//
// Each rank takes GPU local_rank % (GPUs this process sees). cuda-ipc and cuda-vmm let two ranks
// share a GPU (the same device maps its own memory); nvshmem and nccl refuse it, because their
// libraries do: when such a provider starts, the ranks compare their GPUs' UUIDs (shared_gpu.h),
// since a launcher that gives each rank its own GPU makes every rank see one device. status()
// asks before any Team exists: it counts the ranks of this machine from the launcher's variables
// (common/env.h's local_size), which shows sharing only where every rank sees the same GPUs
// (CUDA_VISIBLE_DEVICES unset).
//
// Private to src/providers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "aperture/team.h"
#include "common/cuda_check.h"
#include "common/env.h"
#include "common/format.h"
#include "providers/cuda/shared_gpu.h"
#include "providers/provider_common.h"

namespace aperture::detail {

enum class GpuSharing {
  allowed,  // ranks may outnumber GPUs; they then share them
  refused,  // one GPU per rank: more ranks than GPUs on a machine is an error
};

// The number of GPUs this process sees, or 0 with `why` saying why there are none.
inline int gpu_count(std::string& why) {
  int count = 0;
  if (const cudaError_t rc = cudaGetDeviceCount(&count); rc != cudaSuccess) {
    (void)cudaGetLastError();
    why = "no CUDA device: " + cuda_error_text(rc);
    return 0;
  }
  if (count == 0) why = "no CUDA device: cudaGetDeviceCount reported 0 devices";
  return count;
}

// "" when `local_ranks` ranks may use `gpus` GPUs under `sharing`; the reason otherwise.
inline std::string gpu_sharing_problem(std::string_view who, GpuSharing sharing, int local_ranks, int gpus) {
  if (sharing == GpuSharing::allowed || local_ranks <= gpus) return {};
  return format(
      "{} ranks run on this machine but it has only {} GPU(s); the {} provider needs one GPU per rank "
      "(its library refuses two ranks on one GPU): run at most {} ranks per machine",
      local_ranks, gpus, who, gpus);
}

// status() before any Team exists: the number of GPUs here when the ranks the launcher starts on
// this machine can use them under `sharing`; 0, with `why`, otherwise.
inline int gpus_for_status(std::string_view who, GpuSharing sharing, std::string& why) {
  const int count = gpu_count(why);
  if (count == 0) return 0;
  // With CUDA_VISIBLE_DEVICES set each rank may see a GPU of its own: counting proves nothing, and
  // the provider compares UUIDs when it starts.
  if (std::getenv("CUDA_VISIBLE_DEVICES") != nullptr) return count;
  why = gpu_sharing_problem(who, sharing, env::local_size(env::process()), count);
  return why.empty() ? count : 0;
}

// The UUID of GPU `device`; zeros when it cannot be read.
inline GpuUuid uuid_of_gpu(int device) {
  GpuUuid uuid{};
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, device) == cudaSuccess)
    std::memcpy(uuid.data(), properties.uuid.bytes, uuid.size());
  else
    (void)cudaGetLastError();
  return uuid;
}

// Picks this rank's GPU (local_rank % count) and makes it current. Returns "" or why not, for
// the caller to agree on with the other ranks; `device` (and `count`, when given) are set once
// GPUs are seen. Under GpuSharing::refused it is collective: every rank of the team calls it,
// with or without a GPU, and the ranks compare their GPUs' UUIDs.
inline std::string choose_own_gpu(Team& team, std::string_view who, GpuSharing sharing, int& device,
                                  int* count = nullptr) {
  std::string why;
  const int gpus = gpu_count(why);
  if (count != nullptr) *count = gpus;
  if (gpus > 0) {
    device = team.local_rank() % gpus;
    why = APERTURE_CUDA_TRY(cudaSetDevice(device));
  }
  if (sharing == GpuSharing::refused) {
    const GpuUuid mine = gpus > 0 && why.empty() ? uuid_of_gpu(device) : GpuUuid{};
    std::vector<GpuUuid> uuid_of_rank(static_cast<std::size_t>(team.size()));
    team.allgather(mine.data(), uuid_of_rank.data(), sizeof(GpuUuid));
    if (const auto shared = ranks_sharing_a_gpu(uuid_of_rank, node_of_each_rank(team)); shared && why.empty())
      why = shared_gpu_problem(who, *shared, uuid_of_rank[static_cast<std::size_t>(shared->first_rank)]);
  }
  return why;
}

}  // namespace aperture::detail
