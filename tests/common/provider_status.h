// tests/common/provider_status.h — what aperture says about one provider here, for tests that
// skip where a provider cannot run.
#pragma once

#include <aperture/aperture.h>

#include <optional>
#include <string>

namespace test {

// aperture's status line for provider `name`, or nullopt when aperture knows no such provider.
inline std::optional<aperture::ProviderStatus> provider_status(const std::string& name) {
  for (auto& s : aperture::provider_statuses())
    if (s.name == name) return s;
  return std::nullopt;
}

}  // namespace test
