// tests/conformance/provider_fixture.cpp — the conformance fixture's set-up, tear-down and the
// providers the tests share.
#include "provider_fixture.h"

#include <cstdlib>
#include <map>
#include <optional>

#include "../common/env_override.h"
#include "../common/provider_status.h"
#include "../common/reach_mismatch.h"

namespace conformance {

namespace {
std::map<std::string, std::unique_ptr<aperture::Provider>>& providers() {
  static std::map<std::string, std::unique_ptr<aperture::Provider>> made;
  return made;
}
}  // namespace

std::unique_ptr<aperture::Provider> make_test_provider(const std::string& name) {
  // cuda-vmm starts small inside a large reserve, so that the tests run its grow path.
  std::optional<test::EnvOverride> heap, reserve;
  if (name == "cuda-vmm") {
    heap.emplace("APERTURE_GPU_HEAP_SIZE", "32M");
    reserve.emplace("APERTURE_VMM_RESERVE", kCudaVmmTestReserve);
  }
  return aperture::make_provider(name, world());
}

aperture::Provider& shared_provider(const std::string& name) {
  auto& made = providers()[name];
  if (!made) made = make_test_provider(name);
  return *made;
}

void drop_shared_providers() { providers().clear(); }

void ProviderTest::SetUp() {
  traits_ = &traits_of(GetParam());
  const auto status = test::provider_status(GetParam());
  ASSERT_TRUE(status) << GetParam() << " is not a provider aperture knows";
  if (!status->available) {
    // A GPU provider that cannot run on a machine with a GPU is a failure, not a skip: on the GPU
    // machine "built without NVSHMEM" must not pass for a green run. Without a GPU (the CPU CI),
    // or with APERTURE_TEST_ALLOW_UNAVAILABLE=1 (a GPU machine lacking a library on purpose), it
    // stays a skip.
    std::string no_gpu;
    const bool gpu_here = on_device() && make_device_accessor(no_gpu) != nullptr;
    const char* allow = std::getenv("APERTURE_TEST_ALLOW_UNAVAILABLE");
    if (gpu_here && !(allow != nullptr && std::string(allow) == "1"))
      GTEST_FAIL() << GetParam() << " is not available on a machine with a GPU: " << status->reason
                   << " (APERTURE_TEST_ALLOW_UNAVAILABLE=1 would skip)";
    GTEST_SKIP() << GetParam() << " is not available here: " << status->reason;
  }
  if (on_device()) {
    std::string why;
    accessor_ = make_device_accessor(why);
    if (!accessor_) GTEST_SKIP() << GetParam() << " gives device memory, which this test cannot reach: " << why;
    // NVSHMEM and NCCL take one GPU per rank; every rank of a machine sees the same and skips.
    const int gpus = accessor_->device_count();
    if (traits_->fresh == Fresh::zeroed_each && world().local_size() > gpus)
      GTEST_SKIP() << GetParam() << " needs one GPU per rank: " << world().local_size() << " ranks on this machine, "
                   << gpus << " GPU(s)";
  } else {
    accessor_ = make_host_accessor();
  }
  provider_ = &shared_provider(GetParam());
  me_ = world().rank();
  n_ = world().size();
}

void ProviderTest::TearDown() {
  if (!provider_) return;
  sync();  // nobody frees while a peer still reads or writes
  while (!live_.empty()) {
    if (live_.back().ptr != nullptr || live_.back().bytes != 0) provider_->free(live_.back());
    live_.pop_back();
  }
}

aperture::Allocation& ProviderTest::allocate(std::size_t bytes, std::size_t alignment) {
  live_.push_back(provider_->allocate(bytes, alignment));
  return live_.back();
}

void ProviderTest::free(aperture::Allocation& a) { provider_->free(a); }

void ProviderTest::zero_unless_fresh(aperture::Allocation& a) {
  if (traits_->fresh != Fresh::zeroed_each) accessor_->zero(a.ptr, a.bytes);
}

void ProviderTest::sync() {
  accessor_->finish();
  world().barrier();
}

void ProviderTest::learn_direct(const aperture::SymmetricAddressMap& map) {
  std::vector<std::uint8_t> mine(n_);
  for (int p = 0; p < n_; ++p) mine[p] = map.is_direct(p) ? 1 : 0;
  // GPU memory: the provider's direct peers must be the hardware's, so that a table of zeros
  // fails instead of making every check below check nothing.
  if (const auto hardware = accessor_->expected_reach(world()); !hardware.empty()) {
    const std::string differs = test::reach_mismatch(mine, hardware);
    EXPECT_TRUE(differs.empty()) << GetParam() << ": the provider's direct peers are not the hardware's:" << differs;
  }
  std::vector<std::uint8_t> all(static_cast<std::size_t>(n_) * n_);
  world().allgather(mine.data(), all.data(), n_);
  direct_.assign(n_, std::vector<std::uint8_t>(n_));
  for (int s = 0; s < n_; ++s)
    for (int p = 0; p < n_; ++p) direct_[s][p] = all[static_cast<std::size_t>(s) * n_ + p];
}

}  // namespace conformance
