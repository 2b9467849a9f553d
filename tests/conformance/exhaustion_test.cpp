// tests/conformance/exhaustion_test.cpp — memory that cannot be had, on every provider: a request
// larger than any limit (16 TiB), a heap exhausted by many live allocations, and a heap
// fragmented by small allocations freed in between. Each must be refused on every rank with an
// aperture::Error of code out_of_memory, within seconds (never the timeout), naming the provider,
// the request and the setting that raises the limit; afterwards the provider serves what fits,
// as much as before (nothing leaked), and a host process holds no more descriptors than before.
//
// Each case prints one line, `exhaustion: <provider> <case> ranks=N refused_after_us=T
// usable_after=yes`, the figures of docs/RELIABILITY.md's table (T: the slowest rank's time from
// the call to its error).
#include <gtest/gtest.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "footprint.h"
#include "provider_fixture.h"

namespace conformance {
namespace {

using aperture::Allocation;
using aperture::ErrorCode;
using test::contains;

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kHuge = std::size_t{16} << 40;  // 16 TiB: no machine has it, every limit is below it

// "256M" -> bytes (K, M, G, T); `fallback` when unset.
std::size_t size_from_env(const char* variable, std::size_t fallback) {
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const double number = std::strtod(text, &end);
  std::size_t scale = 1;
  switch (end != nullptr ? *end : '\0') {
    case 'k': case 'K': scale = std::size_t{1} << 10; break;
    case 'm': case 'M': scale = std::size_t{1} << 20; break;
    case 'g': case 'G': scale = std::size_t{1} << 30; break;
    case 't': case 'T': scale = std::size_t{1} << 40; break;
    default: break;
  }
  return static_cast<std::size_t>(number * static_cast<double>(scale));
}

// What the provider can hold per rank here, and the setting its refusal must name.
struct Limit {
  std::size_t bytes;
  std::string setting;
};

class ExhaustionTest : public conformance::ProviderTest {
 protected:
  Limit limit() {
    const std::string name = GetParam();
    if (name == "shm") return {size_from_env("APERTURE_HEAP_SIZE", std::size_t{1} << 30), "APERTURE_HEAP_SIZE"};
    if (name == "cuda-ipc") return {size_from_env("APERTURE_GPU_HEAP_SIZE", 1024 * kMiB), "APERTURE_GPU_HEAP_SIZE"};
    if (name == "cuda-vmm") return {kCudaVmmTestReserveBytes, "APERTURE_VMM_RESERVE"};  // make_test_provider's
    if (name == "nvshmem")
      return {size_from_env("NVSHMEM_SYMMETRIC_SIZE", std::size_t{1} << 30), "NVSHMEM_SYMMETRIC_SIZE"};
    if (name == "openshmem")
      return {size_from_env("SHMEM_SYMMETRIC_HEAP_SIZE", 256 * kMiB), "SHMEM_SYMMETRIC_HEAP_SIZE"};
    if (name == "nccl") return {memory().device_bytes_free(), "GPU memory"};
    // mpi-window: each machine's /dev/shm holds every local rank's segment.
    struct statvfs fs {};
    const char* dir = std::getenv("OMPI_MCA_osc_sm_backing_directory");
    if (::statvfs(dir != nullptr ? dir : "/dev/shm", &fs) != 0) return {0, "/dev/shm"};
    return {static_cast<std::size_t>(fs.f_bavail) * fs.f_frsize / static_cast<std::size_t>(world().local_size()),
            "/dev/shm"};
  }

  // Runs the collective allocate(bytes) that must be refused; checks the refusal and returns the
  // slowest rank's time to it, in microseconds.
  long long expect_refused(std::size_t bytes, const Limit& limit, const char* what) {
    const auto started = std::chrono::steady_clock::now();
    const test::Refusal refusal = test::refusal_of([&] { live_.push_back(provider().allocate(bytes)); });
    const auto took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);
    EXPECT_EQ(refusal.code, ErrorCode::out_of_memory) << what << ": " << refusal.message;
    EXPECT_TRUE(contains(refusal.message, GetParam())) << "names the provider: " << refusal.message;
    EXPECT_TRUE(contains(refusal.message, std::to_string(bytes))) << "names the request: " << refusal.message;
    EXPECT_TRUE(contains(refusal.message, limit.setting)) << "names " << limit.setting << ": " << refusal.message;
    const std::int64_t mine = took.count();
    std::vector<std::int64_t> all(n_);
    world().allgather(&mine, all.data(), sizeof mine);
    std::int64_t slowest = 0;
    for (auto t : all) slowest = std::max(slowest, t);
    EXPECT_LT(slowest, 5000000) << what << ": every rank must be refused within seconds, not at the timeout";
    return slowest;
  }

  // Allocates `chunk` bytes until refused (at most `cap`); returns how many fit. Each is written
  // at both ends with this rank's values and checked there before the next one is asked for.
  std::size_t fill_with(std::size_t chunk, std::size_t cap, const Limit& limit, long long* refused_us) {
    std::size_t fitted = 0;
    for (; fitted < cap; ++fitted) {
      const auto before = live_.size();
      const auto started = std::chrono::steady_clock::now();
      const test::Refusal refusal = test::refusal_of([&] { live_.push_back(provider().allocate(chunk)); });
      if (refusal.code) {
        EXPECT_EQ(live_.size(), before);
        const auto took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);
        EXPECT_EQ(refusal.code, ErrorCode::out_of_memory) << refusal.message;
        EXPECT_TRUE(contains(refusal.message, GetParam()) && contains(refusal.message, std::to_string(chunk)) &&
                    contains(refusal.message, limit.setting))
            << refusal.message;
        const std::int64_t mine = took.count();
        std::vector<std::int64_t> all(n_);
        world().allgather(&mine, all.data(), sizeof mine);
        const std::int64_t slowest = *std::max_element(all.begin(), all.end());
        if (refused_us != nullptr) *refused_us = slowest;
        EXPECT_LT(slowest, 5000000) << "every rank must be refused within seconds, not at the timeout";
        break;
      }
      Allocation& a = live_.back();
      const std::size_t count = chunk / sizeof(std::int32_t);
      memory().fill(Element::int32, a.ptr, 64, me_, int(fitted));
      memory().fill(Element::int32, a.as<std::int32_t>() + count - 64, 64, me_, int(fitted) + 7);
      EXPECT_TRUE(same_elements(memory().read(a.as<std::int32_t>(), 64),
                                expected_slots<std::int32_t>(1, 64, int(fitted), [](std::size_t) { return true; },
                                                             [&](std::size_t) { return me_; })));
    }
    return fitted;
  }

  void free_all() {
    sync();
    while (!live_.empty()) {
      if (live_.back().ptr != nullptr) provider().free(live_.back());
      live_.pop_back();
    }
  }

  // After a refusal: a request that fits is served, written through the table into the next
  // rank and checked there.
  void expect_usable() {
    Allocation& a = allocate(4096);
    learn_direct(a.map);
    zero_unless_fresh(a);
    sync();
    memory().store_to_peers(Element::int32, a.ptr, 4096 / sizeof(std::int32_t) / n_, me_, n_, a.map.peer_bases(), 9);
    sync();
    const std::size_t count = 4096 / sizeof(std::int32_t) / n_;
    EXPECT_TRUE(same_elements(memory().read(a.as<std::int32_t>(), n_ * count), expected_from_sources<std::int32_t>(count, 9)))
        << "a request that fits is served and works after the refusal";
  }

  void report(const char* which, long long us) {
    if (me_ == 0)
      std::printf("exhaustion: %s %s ranks=%d refused_after_us=%lld usable_after=%s\n", GetParam().c_str(), which, n_,
                  us, ::testing::Test::HasFailure() ? "no" : "yes");
  }
};

TEST_P(ExhaustionTest, LargerThanAnyLimitIsRefusedOnEveryRank) {
  const Limit l = limit();
  const test::Footprint before = test::Footprint::now();
  const long long us = expect_refused(kHuge, l, "16 TiB");
  expect_usable();
  free_all();
  if (!on_device()) {
    EXPECT_LE(test::Footprint::now().descriptors, before.descriptors) << "no descriptor left behind";
  }
  report("16TiB", us);
}

TEST_P(ExhaustionTest, HeapExhaustedByLiveAllocationsIsRefusedThenServesAgain) {
  const Limit l = limit();
  ASSERT_GT(l.bytes, 16 * kMiB) << "limit of " << GetParam() << " unknown here";
  // Eight chunks and a bit exhaust it (heaps keep some of themselves, so perhaps fewer fit).
  const std::size_t chunk = std::max<std::size_t>(kMiB, l.bytes / 8 / kMiB * kMiB);
  const test::Footprint before = test::Footprint::now();
  long long us = -1;
  const std::size_t fitted = fill_with(chunk, 64, l, &us);
  EXPECT_GE(fitted, 4u) << "chunks of " << chunk << " bytes in a limit of " << l.bytes;
  EXPECT_LE(fitted, 9u) << "chunks of " << chunk << " bytes in a limit of " << l.bytes << " (never refused?)";
  free_all();
  // Nothing leaked: as many fit again (mpi-window's /dev/shm is shared with the machine: one less allowed).
  long long again_us = -1;
  const std::size_t again = fill_with(chunk, 64, l, &again_us);
  EXPECT_GE(again + (GetParam() == "mpi-window" ? 1 : 0), fitted) << "after freeing everything, fewer fit: a leak";
  free_all();
  expect_usable();
  free_all();
  if (!on_device()) {
    EXPECT_LE(test::Footprint::now().descriptors, before.descriptors) << "no descriptor left behind";
  }
  report("exhausted", us);
}

TEST_P(ExhaustionTest, FragmentedHeapRefusesWhatNoHoleHoldsThenServesAgain) {
  const Limit l = limit();
  ASSERT_GT(l.bytes, 16 * kMiB) << "limit of " << GetParam() << " unknown here";
  const std::size_t chunk = std::max<std::size_t>(kMiB, l.bytes / 16 / kMiB * kMiB);
  long long full_us = -1;
  const std::size_t fitted = fill_with(chunk, 128, l, &full_us);
  ASSERT_GE(fitted, 8u);
  // Free every other one: half the limit is free, in holes of one chunk each.
  sync();
  for (std::size_t i = 0; i < fitted; i += 2) provider().free(live_[i]);
  // Two chunks: fits in no hole of a heap; a provider with a window per allocation has no holes.
  const std::size_t request = 2 * chunk;
  if (traits_->linear) {
    const long long us = expect_refused(request, l, "fragmented");
    report("fragmented", us);
  } else {
    Allocation& served = allocate(request);
    EXPECT_TRUE(served.map.owns(served.ptr, request)) << "a window per allocation: no fragmentation";
    report("fragmented(served)", 0);
  }
  // One chunk still fits in a hole.
  Allocation& hole = allocate(chunk);
  EXPECT_TRUE(hole.map.owns(hole.ptr, chunk));
  free_all();
  expect_usable();
}

INSTANTIATE_TEST_SUITE_P(Conformance, ExhaustionTest, every_provider(), provider_test_name);

}  // namespace
}  // namespace conformance
