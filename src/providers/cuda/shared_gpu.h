// src/providers/cuda/shared_gpu.h — whether two ranks of one machine took the same GPU, told by
// the GPUs' UUIDs rather than by counting devices.
//
// A launcher may give each rank a GPU of its own through CUDA_VISIBLE_DEVICES (Slurm's
// --gpus-per-task, a wrapper script per local rank): every rank then sees one device, device 0,
// and the ranks of a machine outnumber the devices each sees while sharing none. Only the UUIDs
// say which physical GPU each rank took. Ranks on different nodes never share one here, even
// where simulated nodes run on one machine's GPU: each node is a machine of its own to them.
//
// Pure logic (no CUDA), unit-tested; gpu_selection.h gathers the UUIDs over the Team.
//
// Private to src/providers.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>

#include "common/format.h"

namespace aperture::detail {

// A GPU's UUID (cudaDeviceProp::uuid); all zeros for a rank that took no GPU.
using GpuUuid = std::array<unsigned char, 16>;

struct SharedGpu {
  int first_rank = 0;
  int second_rank = 0;
};

// The first pair of ranks (by the second rank, then the first) on one node whose GPUs have the
// same UUID; nullopt when every rank of each node has a GPU of its own.
inline std::optional<SharedGpu> ranks_sharing_a_gpu(std::span<const GpuUuid> uuid_of_rank,
                                                    std::span<const int> node_of_rank) {
  constexpr GpuUuid kNone{};
  for (std::size_t second = 0; second < uuid_of_rank.size(); ++second) {
    if (uuid_of_rank[second] == kNone) continue;
    for (std::size_t first = 0; first < second; ++first)
      if (node_of_rank[first] == node_of_rank[second] && uuid_of_rank[first] == uuid_of_rank[second])
        return SharedGpu{static_cast<int>(first), static_cast<int>(second)};
  }
  return std::nullopt;
}

// As nvidia-smi writes a UUID: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
inline std::string gpu_uuid_text(const GpuUuid& uuid) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text = "GPU-";
  for (std::size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    text += kHex[uuid[i] >> 4];
    text += kHex[uuid[i] & 0xf];
  }
  return text;
}

// Why `who` cannot run with `shared`'s two ranks on one GPU, and the ways out.
inline std::string shared_gpu_problem(std::string_view who, const SharedGpu& shared, const GpuUuid& uuid) {
  return format("ranks {} and {} run on one machine and both took {}; the {} provider needs one GPU per rank "
                "(its library refuses two ranks on one GPU): run at most as many ranks per machine as it has "
                "GPUs, or give each rank a GPU of its own (CUDA_VISIBLE_DEVICES per rank, srun --gpus-per-task=1)",
                shared.first_rank, shared.second_rank, gpu_uuid_text(uuid), who);
}

}  // namespace aperture::detail
