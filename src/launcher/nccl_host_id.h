// src/launcher/nccl_host_id.h — NCCL_HOSTID for the ranks of a node that `aperture launch --nodes`
// splits out of this machine.
//
// NCCL tells hosts apart by a hash of the host name (and boot id), or of NCCL_HOSTID where that
// is set. Nodes split out of one machine share its host name, so NCCL would take them for one
// host: two ranks of one GPU on different nodes fail as a "Duplicate GPU", and ranks of
// different nodes would meet through shared memory, which real nodes cannot. A different
// NCCL_HOSTID per node makes them separate hosts to NCCL, as they are to aperture: NCCL then
// joins them through its network transport (sockets, or InfiniBand where it finds it). A value
// the user set is kept.
//
// Private to src/launcher.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace aperture::launcher {

// {"NCCL_HOSTID", "aperture-node-<node>"}, or nullopt when `user_value` (the launcher's own
// environment's NCCL_HOSTID) is set and not empty.
std::optional<std::pair<std::string, std::string>> nccl_host_id(int node, const char* user_value);

}  // namespace aperture::launcher
