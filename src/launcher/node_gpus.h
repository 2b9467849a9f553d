// src/launcher/node_gpus.h — which GPUs the ranks of a node see when `aperture launch --nodes`
// splits this machine into nodes.
//
// Every split node would see every GPU of the machine, and a rank takes GPU local_rank % GPUs
// (providers/cuda/gpu_selection.h; torch programs take LOCAL_RANK likewise), so rank 0 of every
// node would take GPU 0: on a machine of two GPUs, two nodes of one rank each would time-slice
// GPU 0 and leave GPU 1 idle. Where the machine has a GPU for every rank of the job, each node
// sees its own instead, through CUDA_VISIBLE_DEVICES, as the nodes of a cluster each have theirs:
// node k the GPUs of its ranks' block (the ranks of a node are consecutive, node_place.h), so each
// rank has one to itself. With fewer GPUs than ranks every node sees them all, as before (ranks of
// a node on different GPUs where there are enough; nodes sharing them).
//
// The GPUs are the entries of CUDA_VISIBLE_DEVICES where the user set it (indices or UUIDs, kept
// as written), else the driver's: the entries of /proc/driver/nvidia/gpus (one per GPU), named
// 0 .. count-1, which CUDA numbers the same count of devices.
//
// Private to src/launcher.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "node_place.h"

namespace aperture::launcher {

// The machine's GPUs as CUDA_VISIBLE_DEVICES would name them: its entries when `user_value` (the
// launcher's own CUDA_VISIBLE_DEVICES) is set, even to nothing; else "0" .. "N-1" for the N GPUs
// in /proc/driver/nvidia/gpus (none where that does not exist: no NVIDIA driver).
std::vector<std::string> machine_gpus(const char* user_value);

// CUDA_VISIBLE_DEVICES for the ranks of `place`'s node (rank `rank` of `ranks`, over more than one
// node): the GPUs of its ranks' block, comma-separated; nullopt when `gpus` holds fewer than
// `ranks` (every node then sees every GPU).
std::optional<std::string> node_visible_devices(int rank, int ranks, const NodePlace& place,
                                                const std::vector<std::string>& gpus);

}  // namespace aperture::launcher
