// tests/conformance/churn_test.cpp — thousands of collective allocate/free cycles of varying
// sizes with several allocations live at once; every allocation is written through its table by
// every rank (values per rank and element) and checked in full before it is freed. At the end,
// with everything freed, the process holds no more than after the first rounds: no more
// mappings (/proc/self/maps) or descriptors (/proc/self/fd), on the host and with a GPU
// provider, and no more device memory in use (cudaMemGetInfo) on a GPU. A leak inside a heap the
// provider made up front (shm, cuda-ipc, cuda-vmm: nothing new is mapped per allocation) shows in
// none of those: for them the largest allocation the heap gives is measured before the cycles and
// after, and must not have shrunk.
//
// APERTURE_CHURN_CYCLES sets the number of cycles (default 200, mpi-window 40; the CI stage
// `churn` runs thousands, scripts/churn.sh).
// Rank 0 prints `churn: <provider> ranks=N cycles=C bytes=B mappings=M0->M1 descriptors=D0->D1
// device_in_use=G0->G1 heap_largest=H0->H1`, the figures of docs/RELIABILITY.md (heap_largest: 0
// where the provider's heap is not its own).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "footprint.h"
#include "provider_fixture.h"

namespace conformance {
namespace {

using aperture::Allocation;

// mpi-window makes a file, a mapping per rank and several barriers for every window (about
// 0.1 s a cycle on the 2-core CI machine): fewer cycles by default, so the suite stays quick.
int churn_cycles(const std::string& provider) {
  const char* text = std::getenv("APERTURE_CHURN_CYCLES");
  if (text != nullptr && std::atoi(text) > 0) return std::atoi(text);
  return provider == "mpi-window" ? 40 : 200;
}

// The largest allocation the provider gives, to 4 KiB (a collective search: every rank takes the
// same steps). Own preallocated heaps only: a foreign library's refusals are slow or change its
// state; for the others 0.
std::size_t largest_allocation(aperture::Provider& provider) {
  const std::string name(provider.name());
  if (name != "shm" && name != "cuda-ipc" && name != "cuda-vmm") return 0;
  constexpr std::size_t kStep = 4096;
  std::size_t given = 0, refused = std::size_t{1} << 40;
  while (refused - given > kStep) {
    const std::size_t half = (refused - given) / 2 / kStep * kStep;
    const std::size_t bytes = given + (half > 0 ? half : kStep);
    try {
      Allocation a = provider.allocate(bytes);
      provider.free(a);
      given = bytes;
    } catch (const aperture::Error& e) {
      if (e.code() != aperture::ErrorCode::out_of_memory) throw;
      refused = bytes;
    }
  }
  return given;
}

class ChurnTest : public conformance::ProviderTest {};

TEST_P(ChurnTest, AllocateFreeCyclesLeaveNothingBehind) {
  const int cycles = churn_cycles(GetParam());
  const int warm_up = std::min(50, cycles / 4);
  constexpr std::size_t kMostLive = 6;
  // The same sequence on every rank: the collective calls must match.
  std::mt19937_64 random(0xC4u + static_cast<unsigned>(n_));
  struct Live {
    Allocation a;
    std::size_t count;  // elements of each rank's slot
    int salt;
  };
  std::vector<Live> live;
  test::Footprint baseline;
  std::size_t device_baseline = 0;
  unsigned long long bytes_total = 0;
  const int next = (me_ + 1) % n_;
  const std::size_t heap_before = largest_allocation(provider());

  for (int cycle = 0; cycle < cycles; ++cycle) {
    if (cycle == warm_up) {
      baseline = test::Footprint::now();
      device_baseline = memory().device_bytes_in_use();
    }
    // Sizes from 4 bytes to 256 KiB per rank's slot, most of them small.
    const std::size_t count = std::size_t{1} << (random() % 17);
    const std::size_t jitter = random() % count;
    Live entry{provider().allocate((count + jitter) * sizeof(std::int32_t) * n_), count + jitter, cycle % 8};
    bytes_total += entry.a.bytes;
    learn_direct(entry.a.map);
    zero_unless_fresh(entry.a);
    sync();
    memory().store_to_peers(Element::int32, entry.a.ptr, entry.count, me_, n_, entry.a.map.peer_bases(), entry.salt);
    live.push_back(std::move(entry));
    if (live.size() > kMostLive || (live.size() > 1 && random() % 3 == 0)) {
      sync();  // every rank's stores have landed
      const std::size_t pick = random() % live.size();
      Live& victim = live[pick];
      const auto got = memory().read(victim.a.as<std::int32_t>(), n_ * victim.count);
      const auto expected = expected_from_sources<std::int32_t>(victim.count, victim.salt);
      ASSERT_TRUE(same_elements(got, expected)) << "cycle " << cycle << ": allocation of " << victim.a.bytes << " bytes";
      // A neighbour's copy, through the table too (a second path to the same memory).
      if (victim.a.map.is_direct(next)) {
        auto* loaded = static_cast<std::int32_t*>(memory().scratch(n_ * victim.count * sizeof(std::int32_t)));
        memory().load_from_peers(Element::int32, loaded, victim.a.ptr, victim.count, me_, n_, victim.a.map.peer_bases());
        const auto seen = memory().read(loaded + static_cast<std::size_t>(next) * victim.count, victim.count);
        memory().release(loaded);
        // The first `count` elements of the neighbour's copy are its slot 0: what rank 0 stored there.
        const auto slot0 = expected_slots<std::int32_t>(
            1, victim.count, victim.salt, [&](std::size_t) { return reaches(0, next); }, [](std::size_t) { return 0; });
        ASSERT_TRUE(same_elements(seen, slot0)) << "cycle " << cycle << ": rank " << next << "'s copy, loaded";
      }
      sync();  // nobody frees while a neighbour reads
      provider().free(victim.a);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(pick));
    }
  }
  sync();
  for (auto& entry : live) provider().free(entry.a);
  live.clear();
  sync();
  const test::Footprint after = test::Footprint::now();
  const std::size_t device_after = memory().device_bytes_in_use();
  const std::size_t heap_after = largest_allocation(provider());
  EXPECT_GE(heap_after, heap_before) << "the largest allocation the heap gives shrank from " << heap_before << " to "
                                     << heap_after << " bytes: a block was not given back";
  if (on_device()) {
    // Other processes on the GPU (the other rank of a shared GPU) move this a little.
    EXPECT_LE(device_after, device_baseline + (std::size_t{2} << 20))
        << "device memory in use grew from " << device_baseline << " to " << device_after << " bytes";
  }
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // Under ASan/TSan the sanitizer's own allocator maps memory as the process runs, so the count
  // says nothing of ours there; the plain build (CI's main suite and churn stage) checks it.
  EXPECT_LE(after.mappings, baseline.mappings) << "mappings grew: " << baseline.mappings << " -> " << after.mappings;
#endif
  EXPECT_LE(after.descriptors, baseline.descriptors)
      << "descriptors grew: " << baseline.descriptors << " -> " << after.descriptors;
  if (me_ == 0)
    std::printf("churn: %s ranks=%d cycles=%d bytes=%llu mappings=%zu->%zu descriptors=%zu->%zu "
                "device_in_use=%zu->%zu heap_largest=%zu->%zu\n",
                GetParam().c_str(), n_, cycles, bytes_total, baseline.mappings, after.mappings, baseline.descriptors,
                after.descriptors, device_baseline, device_after, heap_before, heap_after);
}

INSTANTIATE_TEST_SUITE_P(Conformance, ChurnTest, every_provider(), provider_test_name);

}  // namespace
}  // namespace conformance
