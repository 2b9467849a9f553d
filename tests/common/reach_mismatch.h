// tests/common/reach_mismatch.h — the peers where a provider's is_direct() and the hardware
// disagree, for the GPU tests' failure messages (tests/common/gpu_reach.h says what the hardware
// reaches). No CUDA here: the conformance suite's host code includes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace test {

// "" when the provider's view of which peers are direct is what the hardware says; otherwise
// the peers where it differs, for the failure message.
inline std::string reach_mismatch(const std::vector<std::uint8_t>& provider_says,
                                  const std::vector<std::uint8_t>& hardware_says) {
  std::string text;
  for (std::size_t p = 0; p < hardware_says.size(); ++p)
    if (p >= provider_says.size() || (provider_says[p] != 0) != (hardware_says[p] != 0))
      text += " rank " + std::to_string(p) + ": is_direct " +
              (p < provider_says.size() && provider_says[p] ? "true" : "false") + ", hardware " +
              (hardware_says[p] ? "reachable" : "unreachable") + ";";
  return text;
}

}  // namespace test
