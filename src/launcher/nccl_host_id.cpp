// src/launcher/nccl_host_id.cpp — NCCL_HOSTID per split node (nccl_host_id.h).
#include "nccl_host_id.h"

namespace aperture::launcher {

std::optional<std::pair<std::string, std::string>> nccl_host_id(int node, const char* user_value) {
  if (user_value != nullptr && *user_value != '\0') return std::nullopt;
  return std::pair<std::string, std::string>{"NCCL_HOSTID", "aperture-node-" + std::to_string(node)};
}

}  // namespace aperture::launcher
