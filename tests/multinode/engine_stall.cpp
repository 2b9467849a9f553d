// tests/multinode/engine_stall.cpp — an engine call to a rank that stops answering ends in an
// aperture::Error within APERTURE_TIMEOUT, never in a hang.
//
//     aperture launch --mpi --nodes 2 -n 2 -- engine_stall      (APERTURE_TIMEOUT=3, say)
//
// Two ranks split into two nodes (same machine, so the peer's pid can be signalled). Rank 1 stops
// itself (SIGSTOP): its engine's target side, the MPI progress or the message engine's service
// thread, stops with it. Rank 0 then puts, gets, adds and signals through the engine; each call
// must throw a timeout naming rank 1 after about APERTURE_TIMEOUT, not before and not much after.
// Rank 0 then wakes rank 1 (SIGCONT), and both free and exit. Prints "PASS ..." on rank 0.
//
// Then the engine's close (collective: an MPI_Ibarrier) with rank 1 stopped: rank 0's provider
// must be gone after about APERTURE_TIMEOUT, the barrier's request left pending. MPI may not
// cancel a collective's request; Open MPI aborts the job when asked to (what a close did before
// 2026-12-05). Woken, rank 1 closes too, and its barrier meets rank 0's pending one at once (well
// within the timeout): rank 0's service thread goes on progressing it. Last, a new engine on both
// ranks (rank 0's service thread, ended once that barrier completed, starts again) serves puts
// and gets both ways.
#include <aperture/aperture.h>
#include <aperture/detail/env_timeout.h>  // timeout_seconds(): the library's own reading

#include <signal.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "../common/counted_check.h"

namespace {

constexpr const char* kNeedsTwoNodes = "engine_stall needs 2 ranks on 2 nodes: aperture launch --mpi --nodes 2 -n 2";

// Both ranks' process ids, so that rank 0 can wake rank 1 (collective).
std::array<pid_t, 2> both_pids(aperture::Team& team) {
  std::int64_t pids[2] = {0, 0};
  const std::int64_t mine = ::getpid();
  team.allgather(&mine, pids, sizeof mine);
  return {static_cast<pid_t>(pids[0]), static_cast<pid_t>(pids[1])};
}

TEST(MultinodeEngine, CallsToAStoppedRankTimeOutNamingIt) {
  {
    aperture::Team team = aperture::Team::from_env();
    ASSERT_TRUE(team.size() == 2 && team.node_count() == 2) << kNeedsTwoNodes;
    const int me = team.rank();
    const double timeout = aperture::detail::timeout_seconds();
    auto provider = aperture::make_provider("shm", team);
    aperture::Allocation a = provider->allocate(4096);
    // Registered only where aperture has MPI and started by `aperture launch --mpi`: a peer on the
    // other node without an engine is the regression this test guards, not a reason to skip.
    if (!a.map.engine().attached()) {
      provider->free(a);
      FAIL() << "2 nodes but no engine attached to the map (an MPI job split by APERTURE_NODES must attach one)";
    }
    const auto pids = both_pids(team);
    team.barrier();
    if (me == 1) {
      ::raise(SIGSTOP);  // until rank 0 has seen every call time out
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 1 has stopped by now
      aperture::PeerView peers = a.map.peer_view();
      auto* words = a.as<std::int64_t>();
      std::int64_t buffer[8] = {1, 2, 3, 4, 5, 6, 7, 8};
      const auto expect_timeout = [&](const char* what, auto&& call) {
        const auto began = std::chrono::steady_clock::now();
        std::string message;
        aperture::ErrorCode code = aperture::ErrorCode::internal;
        try {
          call();
        } catch (const aperture::Error& e) {
          message = e.what();
          code = e.code();
        }
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
        EXPECT_TRUE(test::counted(!message.empty())) << test::text("%s to a stopped rank returned instead of throwing", what);
        EXPECT_TRUE(test::counted(code == aperture::ErrorCode::timeout)) << test::text("%s: code %d, not timeout: %s", what, int(code), message.c_str());
        EXPECT_TRUE(test::counted(message.find("rank 1") != std::string::npos)) << test::text("%s: the error does not name rank 1: %s", what,
               message.c_str());
        EXPECT_TRUE(test::counted(took >= 0.9 * timeout && took < timeout + 5)) << test::text("%s: threw after %.2f s, APERTURE_TIMEOUT is %.1f s", what,
               took, timeout);
        std::printf("%s: %.2f s: %s\n", what, took, message.c_str());
      };
      expect_timeout("put", [&] { peers.put(words, buffer, 8, 1); });
      expect_timeout("get", [&] { peers.get(buffer, words, 8, 1); });
      expect_timeout("atomic_add", [&] { (void)peers.atomic_add(&words[8], std::int64_t{1}, 1); });
      expect_timeout("signal", [&] { peers.signal(reinterpret_cast<std::uint64_t*>(&words[9]), 1, 1); });
      ::kill(pids[1], SIGCONT);
    }
    team.barrier();
    provider->free(a);
    if (me == 0 && !::testing::Test::HasFailure())
      std::printf("PASS engine_stall: every call to a stopped rank timed out naming it\n");
    team.barrier();
  }
}

TEST(MultinodeEngine, ClosingWhileARankIsStoppedEndsAtTheTimeout) {
  aperture::Team team = aperture::Team::from_env();
  ASSERT_TRUE(team.size() == 2 && team.node_count() == 2) << kNeedsTwoNodes;
  const int me = team.rank();
  const double timeout = aperture::detail::timeout_seconds();
  auto provider = aperture::make_provider("shm", team);  // its heap's engine closes with it
  {
    aperture::Allocation a = provider->allocate(4096);
    ASSERT_TRUE(a.map.engine().attached()) << "2 nodes but no engine attached to the shm heap's map";
    provider->free(a);
  }
  const auto pids = both_pids(team);
  team.barrier();
  if (me == 1) {
    ::raise(SIGSTOP);  // until rank 0's close has given up on it
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 1 has stopped by now
    const auto began = std::chrono::steady_clock::now();
    provider.reset();  // a destructor: the close's timeout is swallowed, the memory goes anyway
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    EXPECT_TRUE(took >= 0.9 * timeout && took < timeout + 5)
        << test::text("closing with rank 1 stopped took %.2f s, APERTURE_TIMEOUT is %.1f s", took, timeout);
    std::printf("close with rank 1 stopped: %.2f s\n", took);
    ::kill(pids[1], SIGCONT);
  }
  if (me == 1) {
    // Rank 0's part of the barrier leaves only with progress on rank 0, whose close has returned:
    // its service thread must go on testing the pending barrier, or this close waits out the timeout.
    const auto began = std::chrono::steady_clock::now();
    provider.reset();
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    EXPECT_TRUE(took < 0.5 * timeout)
        << test::text("rank 1's close after waking took %.2f s: rank 0's half of the barrier did not arrive", took);
    std::printf("close of the woken rank: %.3f s\n", took);
  }
  team.barrier();
  if (me == 0 && !::testing::Test::HasFailure())
    std::printf("PASS engine_stall: a close with a stopped rank ended at the timeout\n");
  team.barrier();
}

TEST(MultinodeEngine, AnEngineOpenedAfterAGivenUpCloseServes) {
  // After the test above, rank 0's service thread ended once its given-up barrier completed; a
  // new engine starts a new one, and calls both ways are applied (values per rank and element).
  aperture::Team team = aperture::Team::from_env();
  ASSERT_TRUE(team.size() == 2 && team.node_count() == 2) << kNeedsTwoNodes;
  const int me = team.rank(), peer = 1 - me;
  auto provider = aperture::make_provider("shm", team);
  aperture::Allocation a = provider->allocate(4096);
  ASSERT_TRUE(a.map.engine().attached()) << "2 nodes but no engine attached to the shm heap's map";
  auto* words = a.as<std::int64_t>();
  for (int i = 0; i < 16; ++i) words[i] = -1;
  team.barrier();
  aperture::PeerView peers = a.map.peer_view();
  // Each rank's 8 words go to its own slot of the peer's copy: [8 rank, 8 rank + 8).
  std::int64_t* my_slot = words + 8 * static_cast<std::size_t>(me);
  const std::int64_t* peer_slot = words + 8 * static_cast<std::size_t>(peer);
  std::int64_t mine[8], theirs[8];
  for (int i = 0; i < 8; ++i) mine[i] = 1000 * (me + 1) + i;
  peers.put(my_slot, mine, 8, peer);
  team.barrier();
  peers.get(theirs, my_slot, 8, peer);  // read back what this rank put there
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(test::counted(theirs[i] == mine[i])) << test::text("rank %d's put [%d] read back as %lld", me, i,
                                                                    static_cast<long long>(theirs[i]));
    EXPECT_TRUE(test::counted(peer_slot[i] == 1000 * (peer + 1) + i))
        << test::text("rank %d's word %d from rank %d is %lld", me, 8 * peer + i, peer,
                      static_cast<long long>(peer_slot[i]));
    EXPECT_TRUE(test::counted(my_slot[i] == -1)) << test::text("rank %d's own slot [%d] was written", me, i);
  }
  team.barrier();
  provider->free(a);
  if (me == 0 && !::testing::Test::HasFailure())
    std::printf("PASS engine_stall: an engine opened after a given-up close serves both ways\n");
  team.barrier();
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
