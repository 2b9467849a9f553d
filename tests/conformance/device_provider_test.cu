// tests/conformance/device_provider_test.cu — what one GPU provider promises beyond the
// conformance suite: cuda-ipc (its heap's limits and messages, churn with equal offsets, maps
// that outlive their provider, another device made current, CUDA errors translated), cuda-vmm
// (one reserved range, growth that keeps everything handed out before), and nccl (its alignment
// limit, maps that outlive their window); nvshmem's are in nvshmem_provider_test.cu. Each suite
// runs on its one provider: Conformance/<Suite>.<Test>/<provider>.
#include <cuda_runtime.h>

#include <gtest/gtest.h>

#include "../common/env_override.h"
#include "provider_fixture.h"
#include "providers/cuda/cuda_check.h"  // APERTURE_CUDA_CHECK, APERTURE_CUDA_TRY

namespace conformance {
namespace {

using aperture::Allocation;
using test::contains;
using test::EnvOverride;
using test::error_of;

// With several GPUs, the provider works whichever device the caller made current since (an
// allocation of `bytes` lands on this rank's GPU, table included), and leaves that device current.
void check_other_current_device(aperture::Provider& provider, const MemoryAccessor& memory, std::size_t bytes) {
  const int count = memory.device_count();
  const int mine = memory.current_device();
  const int other = (mine + 1) % count;
  APERTURE_CUDA_CHECK(cudaSetDevice(other), "test");
  Allocation a = provider.allocate(bytes);
  EXPECT_EQ(memory.current_device(), other) << "the caller's device stays current";
  APERTURE_CUDA_CHECK(cudaSetDevice(mine), "test");
  EXPECT_TRUE(memory.is_local(a.ptr)) << "the memory is on this rank's GPU";
  EXPECT_TRUE(memory.is_local(a.map.peer_bases())) << "so is its table";
  provider.free(a);
}

// ---- cuda-ipc ---------------------------------------------------------------------------------

class CudaIpcTest : public ProviderTest {};

TEST_P(CudaIpcTest, IsTheDefaultWhereAGpuIs) { EXPECT_EQ(aperture::default_provider_name(), "cuda-ipc"); }

// The same deterministic sequence on every rank gives the same offsets everywhere.
TEST_P(CudaIpcTest, ChurnGivesEqualOffsetsOnEveryRank) {
  std::vector<Allocation> live;
  std::vector<std::int64_t> offsets;
  Allocation origin = provider().allocate(64);
  unsigned state = 12345;
  const auto next = [&] { return state = state * 1103515245u + 12345u; };
  for (int step = 0; step < 300; ++step) {
    if (!live.empty() && next() % 3 == 0) {
      const std::size_t victim = next() % live.size();
      provider().free(live[victim]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    } else {
      const std::size_t bytes = next() % 100000;
      const std::size_t alignment = std::size_t{1} << (next() % 13);
      live.push_back(provider().allocate(bytes, alignment));
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(live.back().ptr) % alignment, 0u);
      offsets.push_back(reinterpret_cast<std::int64_t>(live.back().ptr) - reinterpret_cast<std::int64_t>(origin.ptr));
    }
  }
  std::vector<std::int64_t> all(offsets.size() * n_);
  world().allgather(offsets.data(), all.data(), offsets.size() * sizeof(std::int64_t));
  for (int r = 0; r < n_; ++r)
    EXPECT_TRUE(same_elements(std::vector<std::int64_t>(all.begin() + r * offsets.size(),
                                                        all.begin() + (r + 1) * offsets.size()),
                              offsets))
        << "rank " << r << "'s offsets differ from this rank's";
  for (auto& a : live) provider().free(a);
  provider().free(origin);
}

TEST_P(CudaIpcTest, HeapLimitsAreNamed) {
  const auto huge_align = error_of([&] { provider().allocate(100, std::size_t{4} << 20); });
  EXPECT_TRUE(contains(huge_align, "exceeds")) << huge_align;
  const auto too_big = error_of([&] { provider().allocate(std::size_t{1} << 40); });
  EXPECT_TRUE(contains(too_big, "no free block") && contains(too_big, "APERTURE_GPU_HEAP_SIZE")) << too_big;
  // Ranges that are no live allocation: freed, or running past one.
  Allocation a = provider().allocate(4096);
  const void* freed_ptr = a.ptr;
  provider().free(a);
  const auto freed = error_of([&] { provider().symmetric_address_map(freed_ptr, 8); });
  EXPECT_TRUE(contains(freed, "not inside a live allocation")) << freed;
  Allocation& b = allocate(1000);
  const auto past_end = error_of([&] { provider().symmetric_address_map(b.as<char>() + 900, 200); });
  EXPECT_TRUE(contains(past_end, "not inside a live allocation")) << past_end;
}

// A second heap beside the first; a map outlives its allocation and its provider: the table stays
// readable until the last copy goes.
TEST_P(CudaIpcTest, MapsOutliveTheirProvider) {
  std::unique_ptr<aperture::Provider> second;
  {
    EnvOverride small("APERTURE_GPU_HEAP_SIZE", "64M");
    second = aperture::make_provider("cuda-ipc", world());
  }
  Allocation a = second->allocate(1 << 20);
  Allocation& mine = allocate(1 << 20);
  EXPECT_NE(a.ptr, mine.ptr);
  EXPECT_FALSE(mine.map.owns(a.ptr)) << "two heaps, two address ranges";
  for (int p = 0; p < n_; ++p) EXPECT_EQ(a.map.is_direct(p), mine.map.is_direct(p));
  const auto wrong_heap = error_of([&] { provider().symmetric_address_map(a.ptr, 8); });
  EXPECT_TRUE(contains(wrong_heap, "another provider")) << wrong_heap;
  const aperture::SymmetricAddressMap kept = a.map;
  sync();
  second->free(a);
  second.reset();  // the heap and its IPC mappings go; `kept` still owns its device table
  EXPECT_TRUE(same_elements(memory().read(kept.peer_bases(), n_),
                            std::vector<std::int64_t>(kept.host_peer_bases().begin(), kept.host_peer_bases().end())));
}

TEST_P(CudaIpcTest, BadHeapSizeIsNamed) {
  std::string bad;
  {
    EnvOverride nonsense("APERTURE_GPU_HEAP_SIZE", "12Q");
    bad = error_of([&] { aperture::make_provider("cuda-ipc", world()); });
  }
  EXPECT_TRUE(contains(bad, "APERTURE_GPU_HEAP_SIZE='12Q'")) << bad;
  world().barrier();
}

TEST_P(CudaIpcTest, WorksWithAnotherDeviceCurrent) { check_other_current_device(provider(), memory(), 4096); }

// The library's CUDA error translation: the call, the status and file:line, and the thread's last
// error cleared afterwards.
TEST_P(CudaIpcTest, CudaErrorsAreTranslated) {
  void* p = nullptr;
  const auto message =
      error_of([&] { APERTURE_CUDA_CHECK(cudaMalloc(&p, std::size_t{1} << 60), "test allocation"); });
  EXPECT_TRUE(contains(message, "test allocation: cudaMalloc(&p, std::size_t{1} << 60) failed: "
                                "cudaErrorMemoryAllocation"))
      << message;
  EXPECT_TRUE(contains(message, "device_provider_test.cu:")) << message;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  const auto text = APERTURE_CUDA_TRY(cudaSetDevice(-1));
  EXPECT_TRUE(contains(text, "cudaSetDevice(-1) failed: cudaErrorInvalidDevice")) << text;
  EXPECT_TRUE(APERTURE_CUDA_TRY(cudaDeviceSynchronize()).empty());
}

INSTANTIATE_TEST_SUITE_P(Conformance, CudaIpcTest, ::testing::Values("cuda-ipc"), provider_test_name);

// ---- cuda-vmm ---------------------------------------------------------------------------------

// The suite's cuda-vmm provider starts with a 32M heap inside a 1G reserve per rank
// (provider_fixture.cpp), so that these tests grow it.
constexpr std::size_t kInitialHeap = std::size_t{32} << 20;
constexpr std::size_t kReserve = std::size_t{1} << 30;

class CudaVmmTest : public ProviderTest {
 protected:
  // pattern(me, i, salt) into slot me of the first and of the last n * count elements of every
  // direct peer's copy of `a`.
  void store_ends(const Allocation& a, std::size_t count, int salt, const std::int64_t* table) {
    const std::size_t total = a.bytes / sizeof(std::int64_t);
    memory().store_to_peers(Element::int64, a.ptr, count, me_, n_, table, salt);
    memory().store_to_peers(Element::int64, a.as<std::int64_t>() + total - n_ * count, count, me_, n_, table,
                            salt + 1);
  }
  void check_ends(const Allocation& a, std::size_t count, int salt, const std::string& what) {
    const std::size_t total = a.bytes / sizeof(std::int64_t);
    EXPECT_TRUE(same_elements(memory().read(a.as<std::int64_t>(), n_ * count),
                              expected_from_sources<std::int64_t>(count, salt)))
        << what << ": first elements";
    EXPECT_TRUE(same_elements(memory().read(a.as<std::int64_t>() + total - n_ * count, n_ * count),
                              expected_from_sources<std::int64_t>(count, salt + 1)))
        << what << ": last elements";
  }
};

// One reserved range: every peer's heap sits a whole number of slots (APERTURE_VMM_RESERVE) from
// ours, in rank order on one machine.
TEST_P(CudaVmmTest, TableIsOneReservedRange) {
  Allocation& a = allocate(4096 * sizeof(std::int64_t));
  Allocation& b = allocate(1000);
  const auto ta = a.map.host_peer_bases();
  const auto tb = b.map.host_peer_bases();
  const std::int64_t distance = reinterpret_cast<std::int64_t>(b.ptr) - reinterpret_cast<std::int64_t>(a.ptr);
  for (int p = 0; p < n_; ++p) {
    if (!a.map.is_direct(p)) continue;
    const std::int64_t apart = ta[p] - ta[me_];
    EXPECT_EQ(apart % static_cast<std::int64_t>(kReserve), 0) << "peer " << p << " is " << apart << " bytes away";
    EXPECT_EQ(apart / static_cast<std::int64_t>(kReserve), p - me_) << "one machine: slot == rank";
    EXPECT_EQ(tb[p] - ta[p], distance);
  }
}

// Allocations beyond the initial heap make every rank map more memory, and everything handed out
// before (pointers, maps, device tables) keeps working.
TEST_P(CudaVmmTest, GrowthKeepsEverythingHandedOutBefore) {
  constexpr std::size_t kEnds = 1024;
  // Before: an allocation inside the initial heap, written by every peer.
  Allocation& old = allocate(std::size_t{8} << 20);
  learn_direct(old.map);
  memory().zero(old.ptr, old.bytes);
  const aperture::SymmetricAddressMap old_map = old.map;  // kept across the grows
  const std::vector<std::int64_t> old_table(old_map.host_peer_bases().begin(), old_map.host_peer_bases().end());
  const std::int64_t* old_device_table = old_map.peer_bases();
  sync();
  store_ends(old, kEnds, 10, old_map.peer_bases());
  sync();
  check_ends(old, kEnds, 10, "before growing: old allocation");

  // Larger than the whole initial heap: it cannot fit without growing.
  Allocation& big = allocate(kInitialHeap + (std::size_t{8} << 20));
  const std::size_t big_total = big.bytes / sizeof(std::int64_t);
  EXPECT_TRUE(memory().is_local(big.ptr));
  EXPECT_TRUE(memory().is_local(big.as<char>() + big.bytes - 1));
  // Grown memory is zeroed, like the initial heap. Its last 4 MiB lie beyond the initial heap
  // whatever its offset (it is 8 MiB longer than that heap), so they were never used before.
  constexpr std::size_t kTail = (std::size_t{4} << 20) / sizeof(std::int64_t);
  EXPECT_TRUE(same_elements(memory().read(big.as<std::int64_t>() + big_total - kTail, kTail),
                            std::vector<std::int64_t>(kTail, 0)))
      << "freshly grown memory is zeroed";
  memory().zero(big.ptr, big.bytes);  // its start may be reused space
  // The table did not move: the old map still holds the same table, in host and device memory.
  for (int p = 0; p < n_; ++p) {
    EXPECT_EQ(old_map.host_peer_bases()[p], old_table[p]);
    if (old_map.is_direct(p)) {
      EXPECT_EQ(big.map.host_peer_bases()[p] - old_table[p],
                reinterpret_cast<std::int64_t>(big.ptr) - reinterpret_cast<std::int64_t>(old.ptr));
    }
  }
  EXPECT_EQ(old_map.peer_bases(), old_device_table);
  EXPECT_TRUE(same_elements(memory().read(old_device_table, n_), old_table));
  // The old allocation still holds what the peers wrote, and still takes new writes through the
  // old map; the new one works from every peer, at its start and its far end.
  check_ends(old, kEnds, 10, "after growing: old allocation");
  sync();
  store_ends(old, kEnds, 20, old_device_table);
  store_ends(big, kEnds, 30, big.map.peer_bases());
  sync();
  check_ends(old, kEnds, 20, "after growing: old allocation, written through its old map");
  check_ends(big, kEnds, 30, "after growing: grown allocation");

  // Several more grows in a row, each checked, with equal offsets on every rank.
  for (int k = 0; k < 3; ++k) {
    Allocation& a = allocate(kInitialHeap - 4096, 4096);
    memory().zero(a.ptr, a.bytes);
    const std::int64_t offset = reinterpret_cast<std::int64_t>(a.ptr) - reinterpret_cast<std::int64_t>(old.ptr);
    std::vector<std::int64_t> offsets(n_);
    world().allgather(&offset, offsets.data(), sizeof offset);
    for (int r = 0; r < n_; ++r) EXPECT_EQ(offsets[r], offset) << "grow " << k + 2 << ", rank " << r;
    sync();
    store_ends(a, kEnds, 40 + 2 * k, a.map.peer_bases());
    sync();
    check_ends(a, kEnds, 40 + 2 * k, "grow " + std::to_string(k + 2));
  }
  check_ends(big, kEnds, 30, "after more grows: grown allocation");

  // Beyond the reserved space: a clear error on every rank, and the heap still works.
  const auto too_big = error_of([&] { provider().allocate(2 * kReserve); });
  EXPECT_TRUE(contains(too_big, "no free block") && contains(too_big, "APERTURE_VMM_RESERVE")) << too_big;
  Allocation after = provider().allocate(1 << 20);
  EXPECT_NE(after.ptr, nullptr);
  sync();
  provider().free(after);
  while (!live_.empty()) {
    provider().free(live_.back());
    live_.pop_back();
  }

  // Freed space is reused: an allocation as large as the grown heap's free part fits again.
  Allocation& reused = allocate(kInitialHeap * 2);
  memory().zero(reused.ptr, reused.bytes);
  sync();
  store_ends(reused, kEnds, 50, reused.map.peer_bases());
  sync();
  check_ends(reused, kEnds, 50, "reused space");
}

TEST_P(CudaVmmTest, LimitsAndBadEnvironmentAreNamed) {
  const auto huge_align = error_of([&] { provider().allocate(100, std::size_t{1} << 30); });
  EXPECT_TRUE(contains(huge_align, "exceeds")) << huge_align;
  Allocation& aligned = allocate(100, std::size_t{2} << 20);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(aligned.ptr) % (std::size_t{2} << 20), 0u);
  {
    EnvOverride nonsense("APERTURE_VMM_RESERVE", "12Q");
    const auto bad = error_of([&] { aperture::make_provider("cuda-vmm", world()); });
    EXPECT_TRUE(contains(bad, "APERTURE_VMM_RESERVE='12Q'")) << bad;
  }
  {
    EnvOverride heap("APERTURE_GPU_HEAP_SIZE", "64M");
    EnvOverride reserve("APERTURE_VMM_RESERVE", "32M");
    const auto bad = error_of([&] { aperture::make_provider("cuda-vmm", world()); });
    EXPECT_TRUE(contains(bad, "raise APERTURE_VMM_RESERVE")) << bad;
  }
  // A range past a live allocation, and one freed since, are no live allocation.
  const auto past_end = error_of([&] { provider().symmetric_address_map(aligned.as<char>() + 64, 101); });
  EXPECT_TRUE(contains(past_end, "not inside a live allocation")) << past_end;
  Allocation gone = provider().allocate(4096);
  const void* freed_ptr = gone.ptr;
  provider().free(gone);
  const auto freed = error_of([&] { provider().symmetric_address_map(freed_ptr, 8); });
  EXPECT_TRUE(contains(freed, "not inside a live allocation")) << freed;
  world().barrier();
}

// A second provider beside the first, grown; a map outlives its provider.
TEST_P(CudaVmmTest, SecondProviderGrowsToo) {
  std::unique_ptr<aperture::Provider> second;
  {
    EnvOverride reserve("APERTURE_VMM_RESERVE", "256M");
    second = aperture::make_provider("cuda-vmm", world());
  }
  Allocation a = second->allocate(std::size_t{40} << 20);  // grows the second one
  Allocation& b = allocate(1 << 20);
  learn_direct(a.map);
  memory().zero(a.ptr, a.bytes);
  EXPECT_FALSE(b.map.owns(a.ptr));
  const auto wrong_heap = error_of([&] { provider().symmetric_address_map(a.ptr, 8); });
  EXPECT_TRUE(contains(wrong_heap, "another provider")) << wrong_heap;
  sync();
  store_ends(a, 256, 60, a.map.peer_bases());
  sync();
  check_ends(a, 256, 60, "second provider");
  const aperture::SymmetricAddressMap kept = a.map;
  sync();
  second->free(a);
  second.reset();
  EXPECT_TRUE(same_elements(memory().read(kept.peer_bases(), n_),
                            std::vector<std::int64_t>(kept.host_peer_bases().begin(), kept.host_peer_bases().end())));
}

// Larger than all the heap has mapped so far: a grow, with another device current.
TEST_P(CudaVmmTest, GrowsWithAnotherDeviceCurrent) {
  check_other_current_device(provider(), memory(), kInitialHeap * 6);
}

INSTANTIATE_TEST_SUITE_P(Conformance, CudaVmmTest, ::testing::Values("cuda-vmm"), provider_test_name);

// ---- nccl -------------------------------------------------------------------------------------

class NcclTest : public ProviderTest {};

TEST_P(NcclTest, AlignmentAndWindowsThatOutliveTheirMaps) {
  const auto huge = error_of([&] { provider().allocate(100, std::size_t{4} << 20); });
  EXPECT_TRUE(contains(huge, "exceeds")) << huge;
  Allocation z1 = provider().allocate(0);
  Allocation z2 = provider().allocate(0);
  // A map outlives its window: its table stays readable.
  const aperture::SymmetricAddressMap kept = z1.map;
  provider().free(z2);
  provider().free(z1);
  EXPECT_TRUE(same_elements(memory().read(kept.peer_bases(), n_),
                            std::vector<std::int64_t>(kept.host_peer_bases().begin(), kept.host_peer_bases().end())));
  const auto freed = error_of([&] { provider().symmetric_address_map(kept.host_peer_bases().data(), 8); });
  EXPECT_TRUE(contains(freed, "not inside a live allocation")) << freed;
}

INSTANTIATE_TEST_SUITE_P(Conformance, NcclTest, ::testing::Values("nccl"), provider_test_name);

}  // namespace
}  // namespace conformance
