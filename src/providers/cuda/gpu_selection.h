// src/providers/cuda/gpu_selection.h — which GPU a rank uses, decided the same way by every GPU
// provider.
//
// Each rank takes GPU local_rank % (GPUs this process sees). cuda-ipc and cuda-vmm let two ranks
// share a GPU (the same device maps its own memory); nvshmem and nccl refuse it, because their
// libraries do. status() asks before any Team exists, so it counts the ranks of this machine
// from the launcher's variables (common/env.h's local_size).
//
// Private to src/providers.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "aperture/team.h"
#include "common/cuda_check.h"
#include "common/env.h"
#include "common/format.h"

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
  why = gpu_sharing_problem(who, sharing, env::local_size(env::process()), count);
  return why.empty() ? count : 0;
}

// Picks this rank's GPU (local_rank % count) and makes it current. Returns "" or why not, for
// the caller to agree on with the other ranks; `device` (and `count`, when given) are set once
// GPUs are seen.
inline std::string choose_own_gpu(Team& team, std::string_view who, GpuSharing sharing, int& device,
                                  int* count = nullptr) {
  std::string why;
  const int gpus = gpu_count(why);
  if (count != nullptr) *count = gpus;
  if (gpus == 0) return why;
  device = team.local_rank() % gpus;
  why = gpu_sharing_problem(who, sharing, team.local_size(), gpus);
  if (why.empty()) why = APERTURE_CUDA_TRY(cudaSetDevice(device));
  return why;
}

}  // namespace aperture::detail
