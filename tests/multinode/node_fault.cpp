// tests/multinode/node_fault.cpp — the survivors' side of a whole node killed mid-operation
// (tests/multinode/node_kill_test.sh kills every process of one simulated node).
//
// Every rank runs barriers and a put + signal ring among the ranks of its own node, forever. A
// survivor must get an aperture::Error naming a rank of the lost node: it prints
// "node-fault ok (rank R): <message>" and exits 0, otherwise "node-fault FAILED ..." and 1.
// SIGTERM is blocked, as in tests/faults/fault_rank.cpp: the launcher stops the survivors with
// it once a rank died, and a survivor must still say what it saw.
#include <aperture/aperture.h>

#include <signal.h>
#include <unistd.h>

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
    aperture::Allocation data = provider->allocate(4096 * sizeof(double));
    aperture::Allocation flag = provider->allocate(sizeof(std::uint64_t));
    *flag.as<std::uint64_t>() = 0;
    // The ring within this node: its ranks are consecutive (rank blocks).
    const int first = me - team.local_rank();
    const int next = first + (team.local_rank() + 1) % team.local_size();
    std::vector<double> out(4096, me);
    char host[128] = {};
    ::gethostname(host, sizeof host - 1);
    team.barrier();
    std::printf("node-fault ready (rank %d, node %d, host %s)\n", me, team.node(), host);
    for (std::uint64_t round = 1;; ++round) {
      aperture::put(data.as<double>(), out.data(), out.size(), me, next, data.map.peer_bases());
      aperture::signal(flag.as<std::uint64_t>(), round, me, next, flag.map.peer_bases());
      aperture::wait_until_ge(flag.as<std::uint64_t>(), round);
      if (round % 64 == 0) team.barrier();
    }
  } catch (const aperture::Error& e) {
    message = e.what();
  } catch (const std::exception& e) {
    message = std::string("not an aperture::Error: ") + e.what();
  }
  for (int r : others) {
    const std::string needle = "rank " + std::to_string(r);
    const auto at = message.find(needle);
    if (at != std::string::npos && (at + needle.size() == message.size() || !std::isdigit(message[at + needle.size()]))) {
      std::printf("node-fault ok (rank %d): %s\n", me, message.c_str());
      return 0;
    }
  }
  std::printf("node-fault FAILED (rank %d): expected an aperture::Error naming a rank of another node, got: %s\n", me,
              message.c_str());
  return 1;
}
