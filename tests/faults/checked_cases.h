// tests/faults/checked_cases.h — the bad accesses an APERTURE_CHECKED build must stop, written
// once for the host test (checked_ops_test.cpp: each throws aperture::Error) and the GPU test
// (tests/gpu/gpu_checked_test.cu: each prints "aperture checked: ..." and traps the kernel).
//
// The world is simulated in one process: three ranks' copies of one allocation of kSlots
// int64 slots, seen from rank 0; rank 2 is not directly addressable (table entry 0).
#pragma once

#include <aperture/aperture.h>

#include <cstddef>
#include <cstdint>

#if !APERTURE_CHECKED
#  error "checked_cases.h is for APERTURE_CHECKED builds"
#endif

namespace checked_cases {

inline constexpr int kWorld = 3;
inline constexpr int kMe = 0;
inline constexpr int kIndirect = 2;  // its table entry is 0
inline constexpr std::size_t kSlots = 96;
inline constexpr std::size_t kExtent = kSlots * sizeof(std::int64_t);

struct Case {
  const char* name;
  const char* reason;  // what the report must say
};

inline constexpr Case kCases[] = {
    {"store to rank == world_size", "to_rank is out of range"},
    {"load from rank -1", "to_rank is out of range"},
    {"put to a non-direct peer", "not directly addressable"},
    {"put running 1 slot past the end", "runs past the end of the allocation"},
    {"get from below the caller's base", "outside the caller's copy"},
    {"copy into rank world_size + 1", "to_rank is out of range"},
    {"atomic_add one past the last slot", "runs past the end of the allocation"},
    {"atomic_cas on a non-direct peer", "not directly addressable"},
    {"signal a non-direct peer", "not directly addressable"},
    {"a view whose own rank is out of range", "own rank is out of range"},
    {"raw table: store to a non-direct peer", "not directly addressable"},
    {"raw table: load below the caller's base", "below the allocation base"},
};
inline constexpr int kCaseCount = static_cast<int>(sizeof kCases / sizeof kCases[0]);

// Runs bad case `id` through `view` (rank kMe's view of the world); `mine` is rank kMe's copy,
// `local` kSlots ordinary slots of the caller. Each case must be stopped before it touches memory.
APERTURE_HD void run_bad_case(int id, aperture::PeerView view, std::int64_t* mine, std::int64_t* local) {
  auto* flag = reinterpret_cast<std::uint64_t*>(mine + 1);
  switch (id) {
    case 0: view.store(mine, std::int64_t{7}, kWorld); break;
    case 1: local[0] = view.load(mine + 3, -1); break;
    case 2: view.put(mine, local, 4, kIndirect); break;
    case 3: view.put(mine + kSlots - 3, local, 4, 1); break;
    case 4: view.get(local, mine - 1, 2, 1); break;
    case 5: view.copy(mine, mine + 4, 2, 1, kWorld + 1); break;
    case 6: view.atomic_add(mine + kSlots, std::int64_t{1}, 1); break;
    case 7: view.atomic_cas(mine + 5, std::int64_t{0}, std::int64_t{1}, kIndirect); break;
    case 8: view.signal(flag, 1, kIndirect); break;
    case 9: {
      aperture::PeerView stranger = view;
      stranger.rank = kWorld;
      stranger.store(mine, std::int64_t{7}, 1);
      break;
    }
    case 10: aperture::store(mine + 2, std::int64_t{7}, kMe, kIndirect, view.peer_bases); break;
    case 11: local[0] = aperture::load(mine - 1, kMe, 1, view.peer_bases); break;
    default: break;
  }
}

// The same operations kept inside the rules, which a checked build must run unchanged:
// afterwards rank 1's copy holds good_value(i) in every slot (see expected_after_good_ops).
APERTURE_HD std::int64_t good_value(std::size_t i) { return 5000 + 3 * static_cast<std::int64_t>(i); }

APERTURE_HD void run_good_ops(aperture::PeerView view, std::int64_t* mine, std::int64_t* local) {
  constexpr int peer = 1;
  // Slots 0..31: put from local; 32..63: store one by one; 64..79: copy rank 1 -> rank 1 after
  // the put; 80..95: atomics ending at the value; the last slot is reached exactly (no overrun).
  for (std::size_t i = 0; i < 32; ++i) local[i] = good_value(i);
  view.put(mine, local, 32, peer);
  for (std::size_t i = 32; i < 64; ++i) view.store(mine + i, good_value(i), peer);
  for (std::size_t i = 64; i < 80; ++i) local[i] = view.load(mine + i - 64, peer) + (good_value(i) - good_value(i - 64));
  view.put(mine + 64, local + 64, 16, peer);
  view.get(local + 80, mine + 80, 16, peer);  // rank 1's initial values (what the test put there)
  for (std::size_t i = 80; i < kSlots; ++i) {
    view.atomic_xchg(mine + i, std::int64_t{0}, peer);
    view.atomic_add(mine + i, good_value(i) - 1, peer);
    view.atomic_cas(mine + i, good_value(i) - 1, good_value(i), peer);
  }
}

}  // namespace checked_cases
