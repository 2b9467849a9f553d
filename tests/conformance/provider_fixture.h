// tests/conformance/provider_fixture.h — the fixture of the conformance suite: one provider
// (the test's parameter), the accessor for its memory, the team, and the checks every test uses.
//
// Runs under a launcher (`aperture launch -n N`, `--mpi`, or torchrun's variables): every rank
// runs every test in the same order, so the collective calls inside match. A provider that
// cannot run here, or memory this build or machine cannot reach, skips the test with the reason.
#pragma once

#include <gtest/gtest.h>

#include <aperture/aperture.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "../common/error_of.h"  // test::error_of, test::contains
#include "memory_accessor.h"

namespace conformance {

// How a provider hands out memory that no allocation used before.
enum class Fresh {
  unspecified,  // host providers: nothing promised
  zeroed_once,  // aperture's own device heaps: cleared at start-up, then reused
  zeroed_each,  // NVSHMEM and NCCL: every allocation comes zeroed
};

// What the suite expects of each provider.
struct ProviderTraits {
  std::string_view name;
  aperture::MemoryKind kind;
  bool linear;
  Fresh fresh;
  std::string_view status_names;  // what its status line names when available ("" = no promise)
};

inline constexpr ProviderTraits kProviders[] = {
    {"shm", aperture::MemoryKind::host, true, Fresh::unspecified, ""},
    {"mpi-window", aperture::MemoryKind::host, false, Fresh::unspecified, ""},
    {"openshmem", aperture::MemoryKind::host, true, Fresh::unspecified, ""},
    {"cuda-ipc", aperture::MemoryKind::device, true, Fresh::zeroed_once, ""},
    {"cuda-vmm", aperture::MemoryKind::device, true, Fresh::zeroed_once, ""},
    {"nvshmem", aperture::MemoryKind::device, true, Fresh::zeroed_each, "NVSHMEM 3."},
    {"nccl", aperture::MemoryKind::device, false, Fresh::zeroed_each, "NCCL 2."},
};

inline const ProviderTraits& traits_of(std::string_view name) {
  for (const auto& t : kProviders)
    if (t.name == name) return t;
  throw std::invalid_argument("conformance: no traits for provider " + std::string(name));
}

// The parameter list: every provider, named for GoogleTest ("cuda-ipc" -> "cuda_ipc").
inline auto every_provider() {
  return ::testing::Values("shm", "mpi-window", "openshmem", "cuda-ipc", "cuda-vmm", "nvshmem", "nccl");
}
inline std::string provider_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// The team of the job (made by main before any test).
aperture::Team& world();
// cuda-vmm's reserve in this suite: it starts small inside it, so that the tests run its grow path.
inline constexpr const char* kCudaVmmTestReserve = "1G";
inline constexpr std::size_t kCudaVmmTestReserveBytes = std::size_t{1} << 30;

// A new provider named `name` on the world team, made as the suite makes its shared ones.
std::unique_ptr<aperture::Provider> make_test_provider(const std::string& name);
// The provider named `name`, made on the first call and kept until main ends: NVSHMEM starts once
// per process and NCCL communicators take a while to make, so the tests share one of each.
aperture::Provider& shared_provider(const std::string& name);
// Releases them (main, before the team goes).
void drop_shared_providers();

// got == expected element by element; names the first element that differs.
template <class T>
::testing::AssertionResult same_elements(const std::vector<T>& got, const std::vector<T>& expected) {
  if (got.size() != expected.size())
    return ::testing::AssertionFailure() << got.size() << " elements, expected " << expected.size();
  for (std::size_t i = 0; i < expected.size(); ++i)
    if (!(got[i] == expected[i]))
      return ::testing::AssertionFailure() << "element " << i << " of " << expected.size() << ": got " << got[i]
                                           << ", expected " << expected[i];
  return ::testing::AssertionSuccess();
}

// Expected contents of `slots` slots of `count`: slot s holds pattern(source_of(s), i, salt)
// where written(s), else 0.
template <class T, class Written, class Source>
std::vector<T> expected_slots(std::size_t slots, std::size_t count, int salt, Written written, Source source_of) {
  std::vector<T> expected(slots * count, T(0));
  for (std::size_t s = 0; s < slots; ++s)
    if (written(s))
      for (std::size_t i = 0; i < count; ++i) expected[s * count + i] = pattern<T>(source_of(s), i, salt);
  return expected;
}

class ProviderTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;
  void TearDown() override;

  aperture::Provider& provider() { return *provider_; }
  MemoryAccessor& memory() { return *accessor_; }
  bool on_device() const { return traits_->kind == aperture::MemoryKind::device; }
  // Elements per slot of the data tests: enough for every worker of a kernel, and odd on the host
  // so that the last chunk of a put or get is a short one.
  std::size_t slot_count() const { return on_device() ? std::size_t{1} << 13 : 3001; }

  // An allocation freed by TearDown (after a barrier), unless the test frees it first.
  aperture::Allocation& allocate(std::size_t bytes, std::size_t alignment = 256);
  void free(aperture::Allocation& a);
  // Zeroes `a` unless the provider hands out zeroed memory for every allocation.
  void zero_unless_fresh(aperture::Allocation& a);
  // Every rank's operations have completed and every rank got here.
  void sync();

  // Learns, for every pair of ranks, whether the first reaches the second through `map` (collective).
  void learn_direct(const aperture::SymmetricAddressMap& map);
  bool reaches(int source, int target) const { return direct_[source][target] != 0; }
  // An inbox after store or put: slot s holds source s's values where s reaches this rank.
  template <class T>
  std::vector<T> expected_from_sources(std::size_t count, int salt) const {
    return expected_slots<T>(
        n_, count, salt, [&](std::size_t s) { return reaches(int(s), me_); }, [](std::size_t s) { return int(s); });
  }
  // A result after load or get: slot p holds peer p's values where this rank reaches p.
  template <class T>
  std::vector<T> expected_from_peers(std::size_t count, int salt) const {
    return expected_slots<T>(
        n_, count, salt, [&](std::size_t p) { return reaches(me_, int(p)); }, [](std::size_t p) { return int(p); });
  }

  const ProviderTraits* traits_ = nullptr;
  aperture::Provider* provider_ = nullptr;
  std::unique_ptr<MemoryAccessor> accessor_;
  int me_ = 0, n_ = 1;
  std::vector<std::vector<std::uint8_t>> direct_;  // direct_[s][p]: rank s reaches rank p
  std::deque<aperture::Allocation> live_;          // a deque: references stay valid as it grows
};

}  // namespace conformance
