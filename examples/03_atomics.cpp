// examples/03_atomics.cpp — every rank updates counters that live on rank 0, atomically.
//
//   aperture launch -n 4 -- build/examples/example_03_atomics [PROVIDER]
//
// Each rank adds (rank + 1) to rank 0's counter kRounds times, records the highest rank seen
// with atomic_max, and claims a slot with atomic_cas. No rank waits for another between the
// updates; the atomics alone keep the counts right.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include <aperture/aperture.h>

namespace {

constexpr int kRounds = 1000;

struct Counters {
  std::int64_t sum;
  std::int32_t highest_rank;
  std::int32_t owner_plus_one;  // 0: nobody has claimed it yet
};

}  // namespace

int main(int argc, char** argv) try {
  const std::string provider_name = argc > 1 ? argv[1] : "shm";
  aperture::Team team = aperture::Team::from_env();
  auto provider = aperture::make_provider(provider_name, team);
  if (provider->memory_kind() != aperture::MemoryKind::host) {
    std::fprintf(stderr, "example_03_atomics runs on the CPU; provider '%s' hands out GPU memory\n",
                 provider_name.c_str());
    return 2;
  }

  const int me = team.rank();
  const int n = team.size();
  aperture::Allocation allocation = provider->allocate(sizeof(Counters));
  auto* counters = allocation.as<Counters>();
  const std::int64_t* peer_bases = allocation.map.peer_bases();
  *counters = Counters{0, -1, 0};
  team.barrier();  // rank 0's counters are zero before anyone adds

  // Relaxed is enough for a pure counter; the barrier below orders everything for the reader.
  for (int round = 0; round < kRounds; ++round)
    aperture::atomic_add(&counters->sum, std::int64_t{me + 1}, me, 0, peer_bases, aperture::order::relaxed);
  aperture::atomic_max(&counters->highest_rank, std::int32_t{me}, me, 0, peer_bases);
  const std::int32_t found = aperture::atomic_cas(&counters->owner_plus_one, std::int32_t{0}, std::int32_t{me + 1}, me,
                                                  0, peer_bases);
  const bool claimed = found == 0;
  team.barrier();  // every update has landed

  int rc = 0;
  if (me == 0) {
    const std::int64_t expected_sum = std::int64_t{kRounds} * n * (n + 1) / 2;
    const bool ok = counters->sum == expected_sum && counters->highest_rank == n - 1 &&
                    counters->owner_plus_one >= 1 && counters->owner_plus_one <= n;
    std::printf("rank 0 (%s): sum %lld (expected %lld), highest rank %d, slot claimed by rank %d: %s\n",
                std::string(provider->name()).c_str(), static_cast<long long>(counters->sum),
                static_cast<long long>(expected_sum), counters->highest_rank, counters->owner_plus_one - 1,
                ok ? "ok" : "WRONG");
    rc = ok ? 0 : 1;
  }
  // Exactly one rank won the compare-and-swap: check it agrees with what rank 0 saw.
  const std::int32_t owner = aperture::load(&counters->owner_plus_one, me, 0, peer_bases) - 1;
  if (claimed != (owner == me)) {
    std::fprintf(stderr, "rank %d: atomic_cas said %s, but the slot names rank %d\n", me,
                 claimed ? "claimed" : "not claimed", owner);
    rc = 1;
  }

  provider->free(allocation);
  return rc;
} catch (const std::exception& e) {
  std::fprintf(stderr, "example_03_atomics: %s\n", e.what());
  return 1;
}
