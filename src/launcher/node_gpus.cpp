// src/launcher/node_gpus.cpp — the GPUs of a split node (node_gpus.h).
#include "node_gpus.h"

#include <filesystem>
#include <string_view>
#include <system_error>

namespace aperture::launcher {

std::vector<std::string> machine_gpus(const char* user_value) {
  std::vector<std::string> gpus;
  if (user_value != nullptr) {
    std::string_view rest = user_value;
    while (!rest.empty()) {
      const std::size_t comma = rest.find(',');
      std::string_view entry = rest.substr(0, comma);
      while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
      while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
      if (!entry.empty()) gpus.emplace_back(entry);
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
    return gpus;
  }
  std::error_code ec;
  std::size_t count = 0;
  for (std::filesystem::directory_iterator it("/proc/driver/nvidia/gpus", ec), end; !ec && it != end;
       it.increment(ec))
    ++count;
  for (std::size_t i = 0; i < count; ++i) gpus.push_back(std::to_string(i));
  return gpus;
}

std::optional<std::string> node_visible_devices(int rank, int ranks, const NodePlace& place,
                                                const std::vector<std::string>& gpus) {
  if (ranks < 1 || gpus.size() < static_cast<std::size_t>(ranks)) return std::nullopt;
  // The node's block of ranks starts at its first rank, and so does its block of GPUs.
  const auto first = static_cast<std::size_t>(rank - place.local_rank);
  const auto count = static_cast<std::size_t>(place.local_size);
  std::string visible;
  for (std::size_t i = first; i < first + count; ++i) {
    if (i > first) visible += ',';
    visible += gpus[i];
  }
  return visible;
}

}  // namespace aperture::launcher
