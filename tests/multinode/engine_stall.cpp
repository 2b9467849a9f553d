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
#include <aperture/aperture.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "../common/plain_check.h"

int main() {
  try {
    aperture::Team team = aperture::Team::from_env();
    if (team.size() != 2 || team.node_count() != 2) {
      std::fprintf(stderr, "engine_stall needs 2 ranks on 2 nodes: aperture launch --mpi --nodes 2 -n 2\n");
      return 1;
    }
    const int me = team.rank();
    const char* timeout_text = std::getenv("APERTURE_TIMEOUT");
    const double timeout = timeout_text != nullptr ? std::atof(timeout_text) : 60.0;
    auto provider = aperture::make_provider("shm", team);
    aperture::Allocation a = provider->allocate(4096);
    // Registered only where aperture has MPI and started by `aperture launch --mpi`: a peer on the
    // other node without an engine is the regression this test guards, not a reason to skip.
    if (!a.map.engine().attached()) {
      std::fprintf(stderr, "FAIL: 2 nodes but no engine attached to the map (an MPI job split by APERTURE_NODES "
                           "must attach one)\n");
      provider->free(a);
      return 1;
    }
    std::int64_t pids[2] = {0, 0};
    const std::int64_t mine = ::getpid();
    team.allgather(&mine, pids, sizeof mine);
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
        EXPECT(!message.empty(), "%s to a stopped rank returned instead of throwing", what);
        EXPECT(code == aperture::ErrorCode::timeout, "%s: code %d, not timeout: %s", what, int(code), message.c_str());
        EXPECT(message.find("rank 1") != std::string::npos, "%s: the error does not name rank 1: %s", what,
               message.c_str());
        EXPECT(took >= 0.9 * timeout && took < timeout + 5, "%s: threw after %.2f s, APERTURE_TIMEOUT is %.1f s", what,
               took, timeout);
        std::printf("%s: %.2f s: %s\n", what, took, message.c_str());
      };
      expect_timeout("put", [&] { peers.put(words, buffer, 8, 1); });
      expect_timeout("get", [&] { peers.get(buffer, words, 8, 1); });
      expect_timeout("atomic_add", [&] { (void)peers.atomic_add(&words[8], std::int64_t{1}, 1); });
      expect_timeout("signal", [&] { peers.signal(reinterpret_cast<std::uint64_t*>(&words[9]), 1, 1); });
      ::kill(static_cast<pid_t>(pids[1]), SIGCONT);
    }
    team.barrier();
    provider->free(a);
    if (me == 0 && test::failures == 0) std::printf("PASS engine_stall: every call to a stopped rank timed out naming it\n");
    team.barrier();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
  return test::failures == 0 ? 0 : 1;
}
