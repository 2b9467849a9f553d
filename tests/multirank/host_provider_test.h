// tests/multirank/host_provider_test.h — the base of the GoogleTest suites that run once per host
// provider (collectives_test; the providers' own suite is tests/conformance): the provider made
// on the world team, or the test skipped where that provider is not available here.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "../common/provider_status.h"
#include "world.h"

namespace test {

class HostProviderTest : public ::testing::TestWithParam<std::string> {
 protected:
  // A subclass's SetUp calls this first and stops when provider_ is still null (skipped).
  void SetUp() override {
    const auto status = provider_status(GetParam());
    ASSERT_TRUE(status) << GetParam() << " is not a known provider";
    if (!status->available) GTEST_SKIP() << GetParam() << " skipped: " << status->reason;
    provider_ = aperture::make_provider(GetParam(), world());
    me_ = world().rank();
    n_ = world().size();
  }

  std::unique_ptr<aperture::Provider> provider_;
  int me_ = 0, n_ = 1;
};

// The host providers these suites run on, named for GoogleTest ("mpi-window" -> "mpi_window").
inline auto host_providers() { return ::testing::Values("shm", "mpi-window", "openshmem"); }

inline std::string provider_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

}  // namespace test
