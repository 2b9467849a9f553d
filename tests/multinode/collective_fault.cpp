// tests/multinode/collective_fault.cpp — the survivors' side of a node killed in the middle of
// collectives across nodes (tests/multinode/collective_kill_test.sh kills every rank of node 1).
//
// Every rank runs all_reduce (the whole-vector and the sharded path), all_gather and broadcast
// over the team, forever. A survivor must get an aperture::Error naming a rank of the lost node:
// it prints "collective-fault ok (rank R): <message>" and exits 0, otherwise
// "collective-fault FAILED ..." and 1. SIGTERM is blocked (mpirun stops the survivors with it once a
// rank died, and a survivor must still say what it saw).
#include <aperture/aperture.h>
#include <aperture/collectives/collectives.h>

#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

int main() {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::vector<int> others;  // ranks on other nodes than this one
  int me = -1;
  std::string message = "(no error)";
  try {
    aperture::Team team = aperture::Team::from_env();
    me = team.rank();
    for (int r = 0; r < team.size(); ++r)
      if (!team.same_node(r)) others.push_back(r);
    auto provider = aperture::make_provider("shm", team);
    aperture::Communicator comm(*provider, team);
    const std::size_t count = 64 * 1024;  // 256 KiB of floats: the sharded all_reduce
    std::vector<float> in(count * team.size(), static_cast<float>(me)), out(count * team.size());
    comm.barrier();
    std::printf("collective-fault ready (rank %d, node %d, pid %d)\n", me, team.node(), static_cast<int>(getpid()));
    for (std::uint64_t round = 1;; ++round) {
      comm.all_reduce(in.data(), out.data(), count, aperture::ReduceOp::sum);
      comm.all_reduce(in.data(), out.data(), 100, aperture::ReduceOp::max);
      comm.all_gather(in.data(), out.data(), 1000);
      comm.broadcast(in.data(), out.data(), 1000, static_cast<int>(round % static_cast<std::uint64_t>(team.size())));
    }
  } catch (const aperture::Error& e) {
    message = e.what();
  } catch (const std::exception& e) {
    message = std::string("not an aperture::Error: ") + e.what();
  }
  for (int r : others) {
    const std::string needle = "rank " + std::to_string(r);
    for (auto at = message.find(needle); at != std::string::npos; at = message.find(needle, at + 1)) {
      if (at + needle.size() == message.size() || !std::isdigit(static_cast<unsigned char>(message[at + needle.size()]))) {
        std::printf("collective-fault ok (rank %d): %s\n", me, message.c_str());
        return 0;
      }
    }
  }
  std::printf("collective-fault FAILED (rank %d): expected an aperture::Error naming a rank of another node, got: %s\n", me,
              message.c_str());
  return 1;
}
