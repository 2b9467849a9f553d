// tests/multinode/engine_test.cpp — every operation of a PeerView reaches every rank of a job
// over several nodes: the ranks of this node directly, the others through the engine (MPI RMA).
//
//     engine_test [ROUNDS] [PROVIDER...]     (default: 300 rounds; shm and mpi-window)
//
// Run under mpirun over simulated nodes (tests/multinode/run_engine.sh), or split by
// APERTURE_NODES on one machine. Every rank writes values that differ per rank and per element
// and checks every element it receives (GoogleTest); prints "PASS ..." on rank 0 and exits 0, or names the
// first wrong element and exits 1.
#include <aperture/aperture.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../common/counted_check.h"

namespace {

std::int64_t value(int rank, std::size_t i, int salt) {
  return (static_cast<std::int64_t>(rank) + 1) * 1000003 + static_cast<std::int64_t>(i) * 17 + salt * 7919;
}

constexpr std::size_t kCount = 4096;  // elements of each rank's slot (32 KiB)

// Every peer's map agrees with the node layout: direct exactly within the node (openshmem: only
// within the node; shmem_ptr may say NULL for a peer of the node too), an engine for the rest.
void check_layout(aperture::Team& team, const aperture::SymmetricAddressMap& map, const char* who) {
  const bool may_be_indirect_within_node = std::string(who) == "openshmem";
  for (int p = 0; p < team.size(); ++p)
    EXPECT_TRUE(test::counted(map.is_direct(p) == team.same_node(p) || (may_be_indirect_within_node && !map.is_direct(p)))) << test::text("%s: rank %d direct=%d but same_node=%d", who, p, int(map.is_direct(p)), int(team.same_node(p)));
  // The test runs split over nodes (main refuses one node): the peers of other nodes need the engine.
  EXPECT_TRUE(test::counted(map.engine().attached())) << test::text("%s: %d nodes but no engine attached to the map", who, team.node_count());
}

// put, get, store, load and copy with every peer; `inbox` has one slot per rank.
void data_operations(aperture::Team& team, aperture::PeerView peers, std::int64_t* inbox, std::int64_t* mine,
                     int salt) {
  const int me = team.rank(), n = team.size();
  for (std::size_t i = 0; i < kCount; ++i) mine[i] = value(me, i, salt);
  for (std::size_t i = 0; i < std::size_t(n) * kCount; ++i) inbox[i] = -1;
  team.barrier();
  for (int p = 0; p < n; ++p) peers.put(&inbox[me * kCount], mine, kCount / 2, p);  // first half by put
  for (int p = 0; p < n; ++p)
    for (std::size_t i = kCount / 2; i < kCount; i += 1)
      peers.store(&inbox[me * kCount + i], value(me, i, salt), p);  // second half by store
  team.barrier();
  for (int from = 0; from < n; ++from)
    for (std::size_t i = 0; i < kCount; ++i)
      EXPECT_TRUE(test::counted(inbox[from * kCount + i] == value(from, i, salt))) << test::text("put/store: slot of rank %d element %zu: %lld, not %lld",
             from, i, (long long)inbox[from * kCount + i], (long long)value(from, i, salt));
  // get and load what every peer has in its `mine`
  std::vector<std::int64_t> got(kCount);
  for (int p = 0; p < n; ++p) {
    peers.get(got.data(), mine, kCount, p);
    for (std::size_t i = 0; i < kCount; ++i)
      EXPECT_TRUE(test::counted(got[i] == value(p, i, salt))) << test::text("get from rank %d element %zu: %lld", p, i, (long long)got[i]);
    for (std::size_t i = 0; i < kCount; i += 97)
      EXPECT_TRUE(test::counted(peers.load(&mine[i], p) == value(p, i, salt))) << test::text("load from rank %d element %zu", p, i);
  }
  // The copy lands where put/store wrote the same values for slot 0 (p == from there): clear the
  // inbox first, so that only the copy can make the check below pass.
  for (std::size_t i = 0; i < std::size_t(n) * kCount; ++i) inbox[i] = -1;
  team.barrier();
  // copy between two other ranks: rank p's `mine` into rank q's slot `me` (q = p + 1)
  for (int p = 0; p < n; ++p) {
    const int q = (p + 1) % n;
    if ((p + me) % n != 0) continue;  // each (p, q) pair once per rank in turn, ranks spread over pairs
    peers.copy(&inbox[me * kCount], mine, kCount, p, q);
  }
  team.barrier();
  for (int from = 0; from < n; ++from) {
    // who copied into our slot `from`? rank `from` copied p's data with (p + from) % n == 0 and q == me
    const int p = (n - from) % n;
    if ((p + 1) % n != me) continue;
    for (std::size_t i = 0; i < kCount; ++i)
      EXPECT_TRUE(test::counted(inbox[from * kCount + i] == value(p, i, salt))) << test::text("copy by rank %d from rank %d element %zu: %lld", from, p,
             i, (long long)inbox[from * kCount + i]);
  }
  team.barrier();
}

// The nine atomics: each rank applies each to word `me` of every peer's array, then checks the
// old values it got back and what the peers hold.
void atomics(aperture::Team& team, aperture::PeerView peers, std::int64_t* words, double* reals) {
  const int me = team.rank(), n = team.size();
  constexpr int kOps = 9;
  for (int k = 0; k < kOps * n; ++k) words[k] = 1000 + k;
  for (int k = 0; k < n; ++k) reals[k] = 0.5 * k;
  team.barrier();
  for (int p = 0; p < n; ++p) {
    auto* w = words + kOps * me;  // this rank's nine words in every peer
    const std::int64_t base = 1000 + kOps * me;
    EXPECT_TRUE(test::counted(peers.atomic_add(&w[0], std::int64_t(me + 5), p) == base + 0)) << test::text("atomic_add old on rank %d", p);
    EXPECT_TRUE(test::counted(peers.atomic_sub(&w[1], std::int64_t(me + 3), p) == base + 1)) << test::text("atomic_sub old on rank %d", p);
    EXPECT_TRUE(test::counted(peers.atomic_and(&w[2], std::int64_t(0xff0), p) == base + 2)) << test::text("atomic_and old on rank %d", p);
    EXPECT_TRUE(test::counted(peers.atomic_or(&w[3], std::int64_t(1) << (20 + me), p) == base + 3)) << test::text("atomic_or old on rank %d", p);
    EXPECT_TRUE(test::counted(peers.atomic_xor(&w[4], std::int64_t(0x5555), p) == base + 4)) << test::text("atomic_xor old on rank %d", p);
    EXPECT_TRUE(test::counted(peers.atomic_min(&w[5], std::int64_t(-me), p) == base + 5)) << test::text("atomic_min old on rank %d", p);
    EXPECT_TRUE(test::counted(peers.atomic_max(&w[6], std::int64_t(1 << 30) + me, p) == base + 6)) << test::text("atomic_max old on rank %d", p);
    EXPECT_TRUE(test::counted(peers.atomic_xchg(&w[7], std::int64_t(77 * (me + 1)), p) == base + 7)) << test::text("atomic_xchg old on rank %d", p);
    EXPECT_TRUE(test::counted(peers.atomic_cas(&w[8], base + 8, std::int64_t(-5 - me), p) == base + 8)) << test::text("atomic_cas old on rank %d", p);
    EXPECT_TRUE(test::counted(peers.atomic_cas(&w[8], base + 8, std::int64_t(999), p) == -5 - me)) << test::text("failed atomic_cas on rank %d", p);
    EXPECT_TRUE(test::counted(peers.atomic_add(&reals[me], 0.25 * (me + 1), p) == 0.5 * me)) << test::text("double atomic_add old on rank %d", p);
  }
  team.barrier();
  for (int r = 0; r < n; ++r) {
    const std::int64_t* w = words + kOps * r;
    const std::int64_t base = 1000 + kOps * r;
    EXPECT_TRUE(test::counted(w[0] == base + 0 + r + 5)) << test::text("add from rank %d", r);
    EXPECT_TRUE(test::counted(w[1] == base + 1 - (r + 3))) << test::text("sub from rank %d", r);
    EXPECT_TRUE(test::counted(w[2] == ((base + 2) & 0xff0))) << test::text("and from rank %d", r);
    EXPECT_TRUE(test::counted(w[3] == ((base + 3) | (std::int64_t(1) << (20 + r))))) << test::text("or from rank %d", r);
    EXPECT_TRUE(test::counted(w[4] == ((base + 4) ^ 0x5555))) << test::text("xor from rank %d", r);
    EXPECT_TRUE(test::counted(w[5] == -r)) << test::text("min from rank %d", r);
    EXPECT_TRUE(test::counted(w[6] == (std::int64_t(1) << 30) + r)) << test::text("max from rank %d", r);
    EXPECT_TRUE(test::counted(w[7] == 77 * (r + 1))) << test::text("xchg from rank %d", r);
    EXPECT_TRUE(test::counted(w[8] == -5 - r)) << test::text("cas from rank %d", r);
    EXPECT_TRUE(test::counted(reals[r] == 0.5 * r + 0.25 * (r + 1))) << test::text("double add from rank %d", r);
  }
  // Contention: every rank adds to word 0 of rank 0 through its own path many times.
  team.barrier();
  if (me == 0) words[0] = 0;
  team.barrier();
  // With the RMA engine only the ranks of other nodes than rank 0 add here: MPI's atomics are
  // atomic with one another, not with the CPU's (docs/MULTINODE.md). The message engine's target
  // applies them with the CPU's own atomics, so there the direct ranks add at the same time.
  constexpr int kAdds = 200;
  const char* engine = std::getenv("APERTURE_ENGINE");
  const bool system_wide = engine != nullptr && std::string(engine) == "messages";
  const auto adds = [&](int r) { return system_wide || team.node_of(r) != team.node_of(0) || n == 1; };
  if (adds(me))
    for (int k = 0; k < kAdds; ++k) peers.atomic_add(&words[0], std::int64_t(me + 1), 0);
  team.barrier();
  if (me == 0) {
    std::int64_t expected = 0;
    for (int r = 0; r < n; ++r)
      if (adds(r)) expected += std::int64_t(kAdds) * (r + 1);
    EXPECT_TRUE(test::counted(words[0] == expected)) << test::text("contended atomic_add: %lld, not %lld", (long long)words[0], (long long)expected);
  }
  team.barrier();
}

// Ordering: data put before a signal is visible after the matching wait, round after round. The
// partner is the rank with the same local index on the next node (another node when there are
// several). The receiver checks every element, then acknowledges so the sender may overwrite.
void ordering(aperture::Team& team, aperture::PeerView peers, std::int64_t* box, std::uint64_t* flags, int rounds) {
  const int me = team.rank(), n = team.size();
  const int step = team.size() / team.node_count();
  const int to = (me + step) % n, from = (me - step + n) % n;
  std::vector<std::int64_t> data(kCount);
  flags[0] = flags[1] = 0;
  team.barrier();
  for (int round = 1; round <= rounds; ++round) {
    for (std::size_t i = 0; i < kCount; ++i) data[i] = value(me, i, round);
    peers.put(box, data.data(), kCount, to);
    peers.signal(&flags[0], std::uint64_t(round), to);  // data, then the flag
    aperture::wait_until_ge(&flags[0], std::uint64_t(round));
    for (std::size_t i = 0; i < kCount; ++i)
      if (box[i] != value(from, i, round)) {
        EXPECT_TRUE(test::counted(false)) << test::text("round %d: element %zu from rank %d is %lld, not %lld: the signal overtook its data", round, i,
               from, (long long)box[i], (long long)value(from, i, round));
        break;
      }
    peers.signal(&flags[1], std::uint64_t(round), from);  // done reading: `from` may write again
    aperture::wait_until_ge(&flags[1], std::uint64_t(round));
  }
  team.barrier();
}


int rounds = 300;                // argv[1]
std::vector<std::string> names;  // argv[2...]; default shm and mpi-window

TEST(MultinodeEngine, EveryOperationReachesEveryRankOverNodes) {
  {
    aperture::Team team = aperture::Team::from_env();
    // Run on one node, every peer is direct and the engine is never used: that is not this test.
    ASSERT_GE(team.node_count(), 2) << "engine_test runs split over nodes (aperture launch --mpi --nodes N, or "
                                       "run_engine.sh)";
    std::vector<std::unique_ptr<aperture::Provider>> providers;
    std::vector<aperture::Allocation> allocations;
    for (const auto& name : names) {
      providers.push_back(aperture::make_provider(name, team));
      // inbox, mine, words, reals, box, flags
      const std::size_t bytes = (team.size() + 2) * kCount * 8 + 4096;
      allocations.push_back(providers.back()->allocate(bytes));
    }
    for (std::size_t k = 0; k < providers.size(); ++k) {
      auto& a = allocations[k];
      check_layout(team, a.map, names[k].c_str());
      auto* base = a.as<std::int64_t>();
      std::int64_t* inbox = base;
      std::int64_t* mine = inbox + team.size() * kCount;
      std::int64_t* box = mine + kCount;
      auto* words = reinterpret_cast<std::int64_t*>(box + kCount);
      auto* reals = reinterpret_cast<double*>(words + 9 * team.size());
      auto* flags = reinterpret_cast<std::uint64_t*>(reals + team.size());
      data_operations(team, a.map.peer_view(), inbox, mine, int(k) + 1);
      atomics(team, a.map.peer_view(), words, reals);
      ordering(team, a.map.peer_view(), box, flags, rounds);
      // A view: the map of the `box` sub-range, which translates (and reaches) from its own start.
      aperture::SymmetricAddressMap view = providers[k]->symmetric_address_map(box, kCount * 8);
      {
        std::vector<std::int64_t> mine_copy(kCount);
        for (std::size_t i = 0; i < kCount; ++i) mine_copy[i] = value(team.rank(), i, 99);
        team.barrier();
        const int to = (team.rank() + 1) % team.size();
        view.peer_view().put(box, mine_copy.data(), kCount, to);
        team.barrier();
        const int from = (team.rank() + team.size() - 1) % team.size();
        for (std::size_t i = 0; i < kCount; ++i)
          EXPECT_TRUE(test::counted(box[i] == value(from, i, 99))) << test::text("%s view put from rank %d element %zu", names[k].c_str(), from, i);
        team.barrier();
      }
    }
    // Two providers in one loop: each rank puts into both, the same values, in one pass.
    if (providers.size() >= 2) {
      auto first = allocations[0].map.peer_view(), second = allocations[1].map.peer_view();
      auto* a = allocations[0].as<std::int64_t>();
      auto* b = allocations[1].as<std::int64_t>();
      team.barrier();
      for (int p = 0; p < team.size(); ++p)
        for (std::size_t i = 0; i < kCount; ++i) {
          first.store(&a[team.rank() * kCount + i], value(team.rank(), i, 500), p);
          second.store(&b[team.rank() * kCount + i], value(team.rank(), i, 600), p);
        }
      team.barrier();
      for (int r = 0; r < team.size(); ++r)
        for (std::size_t i = 0; i < kCount; ++i) {
          EXPECT_TRUE(test::counted(a[r * kCount + i] == value(r, i, 500))) << test::text("two providers: %s slot %d element %zu", names[0].c_str(), r, i);
          EXPECT_TRUE(test::counted(b[r * kCount + i] == value(r, i, 600))) << test::text("two providers: %s slot %d element %zu", names[1].c_str(), r, i);
        }
      team.barrier();
    }
    for (std::size_t k = 0; k < providers.size(); ++k) providers[k]->free(allocations[k]);
    providers.clear();
    if (!::testing::Test::HasFailure() && team.rank() == 0)
      std::printf("PASS: %d ranks on %d nodes, providers %zu, %d ordering rounds, %llu checks\n", team.size(),
                  team.node_count(), names.size(), rounds, test::checks.load());
    team.barrier();
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc > 1) rounds = std::atoi(argv[1]);
  for (int i = 2; i < argc; ++i) names.emplace_back(argv[i]);
  if (names.empty()) names = {"shm", "mpi-window"};
  return RUN_ALL_TESTS();
}
