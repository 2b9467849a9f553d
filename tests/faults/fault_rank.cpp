// fault_rank MODE VICTIM [MARKER]: one rank is killed with SIGKILL while the job is in MODE, and
// every survivor must get an aperture::Error naming it.
//
//   rendezvous  the victim dies while the team forms (Team::from_env and its first allgather)
//   allocate    ... while every rank creates the shm provider and allocates and frees in a loop
//   barrier     ... while every rank runs barriers in a loop
//   ring        ... while the ranks run a ring of put + signal / wait_until_ge (no Team call in
//               the loop: the hub tells every rank of the death, and the job watch of a host
//               wait ends the wait at once, naming the dead rank)
//   collective  ... while the ranks run all-reduces, all-gathers and all-to-alls of a
//               Communicator (aperture::collectives) on shm memory: the same, from the
//               collectives' own waits
//
// The victim starts a thread that SIGKILLs its process after a random delay of 0 to
// APERTURE_FAULT_MAX_DELAY_MS milliseconds (default 3 for rendezvous, 20 otherwise), so over
// many runs the death lands in every step of the mode. A survivor prints "fault-check ok (MODE, rank R): <message>" and exits
// 0 when its error names the victim; otherwise "fault-check FAILED ..." and exit 1. A hang is
// caught by the driver's time limit (tests/faults/kill_rank.sh). MARKER is ignored: the driver
// puts it on the command line to find leftover processes.
//
// The team must have APERTURE_TEST_EXPECTED_RANKS ranks (kill_rank.sh sets it): a team of one
// cannot pass. With APERTURE_FAULT_START_DIR set, every rank first creates START_DIR/started.R,
// and the victim arms its killer only once all of them exist (at most 10 s): every survivor has
// started, so every survivor must report (kill_rank.sh fails one that did not).
//
// SIGTERM is blocked: `aperture launch` stops the survivors with SIGTERM as soon as a rank dies,
// and a survivor must still be able to report what it saw (the launcher's SIGKILL after its
// grace period would fail the check).
#include <aperture/aperture.h>
#include <aperture/collectives/collectives.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

// This rank as its launcher numbers it, before a Team exists (the kill may come during rendezvous).
// Read directly: this program shares the library with aperture::collectives, so it cannot link
// the library's private objects (bootstrap/launched_by.h) without holding a second copy of it.
int rank_from_env() {
  for (const char* name : {"APERTURE_RANK", "RANK", "OMPI_COMM_WORLD_RANK"})
    if (const char* value = std::getenv(name)) return std::atoi(value);
  return 0;
}

void start_killer(int max_delay_ms) {
  if (const char* text = std::getenv("APERTURE_FAULT_MAX_DELAY_MS")) max_delay_ms = std::atoi(text);
  std::random_device seed;
  const int delay_us = static_cast<int>(seed() % static_cast<unsigned>(max_delay_ms * 1000 + 1));
  std::thread([delay_us] {
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    ::kill(::getpid(), SIGKILL);
  }).detach();
}

// "rank V" as a whole number: "rank 1" must not match "rank 12".
bool names_rank(const std::string& message, int rank) {
  const std::string needle = "rank " + std::to_string(rank);
  for (auto at = message.find(needle); at != std::string::npos; at = message.find(needle, at + 1)) {
    const auto end = at + needle.size();
    if (end == message.size() || message[end] < '0' || message[end] > '9') return true;
  }
  return false;
}

void run(const std::string& mode, std::optional<aperture::Team>& team, bool victim) {
  if (mode == "rendezvous") {
    team.emplace(aperture::Team::from_env());
    for (;;) team->barrier();  // until the victim's death reaches us
  }
  team.emplace(aperture::Team::from_env());
  if (victim && mode != "collective") start_killer(20);
  if (mode == "barrier") {
    for (;;) team->barrier();
  }
  auto provider = aperture::make_provider("shm", *team);
  if (mode == "allocate") {
    std::vector<aperture::Allocation> live;
    for (std::size_t i = 1;; ++i) {
      live.push_back(provider->allocate(64 * (i % 7 + 1), std::size_t{64} << (i % 4)));
      static_cast<char*>(live.back().ptr)[0] = 1;
      if (live.size() > 3) {
        provider->free(live.front());
        live.erase(live.begin());
      }
    }
  }
  if (mode == "ring") {
    constexpr std::size_t kCount = 4096;
    aperture::Allocation buffer = provider->allocate(kCount * sizeof(double));
    aperture::Allocation flags = provider->allocate(sizeof(std::uint64_t));
    *flags.as<std::uint64_t>() = 0;
    team->barrier();
    const int me = team->rank(), n = team->size(), next = (me + 1) % n;
    std::vector<double> out(kCount, me);
    for (std::uint64_t round = 1;; ++round) {
      aperture::put(buffer.as<double>(), out.data(), kCount, me, next, buffer.map.peer_bases());
      aperture::signal(flags.as<std::uint64_t>(), round, me, next, flags.map.peer_bases());
      aperture::wait_until_ge(flags.as<std::uint64_t>(), round);
    }
  }
  if (mode == "collective") {
    aperture::Communicator comm(*provider, *team);
    if (victim) start_killer(20);  // once the collectives run: setup is the allocate mode
    const int n = team->size();
    constexpr std::size_t kCount = 2048;
    std::vector<float> in(kCount * static_cast<std::size_t>(n), static_cast<float>(team->rank()));
    std::vector<float> out(kCount * static_cast<std::size_t>(n));
    for (;;) {
      comm.all_reduce(in.data(), out.data(), kCount, aperture::ReduceOp::sum);
      comm.all_gather(in.data(), out.data(), kCount);
      comm.all_to_all(in.data(), out.data(), kCount);
    }
  }
  throw std::runtime_error("unknown mode " + mode);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: fault_rank rendezvous|allocate|barrier|ring|collective VICTIM [MARKER]\n");
    return 2;
  }
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);

  const std::string mode = argv[1];
  const int victim = std::atoi(argv[2]);
  const int me = rank_from_env();
  const char* expected_text = std::getenv("APERTURE_TEST_EXPECTED_RANKS");
  const int expected = expected_text != nullptr ? std::atoi(expected_text) : 0;
  if (expected < 2) {
    std::fprintf(stderr, "fault_rank: set APERTURE_TEST_EXPECTED_RANKS to the job's rank count (2 or more)\n");
    return 2;
  }
  if (const char* hub = std::getenv("APERTURE_HUB")) std::printf("fault-hub %s\n", hub);
  if (const char* dir = std::getenv("APERTURE_FAULT_START_DIR")) {
    const std::string mine = std::string(dir) + "/started." + std::to_string(me);
    if (std::FILE* f = std::fopen(mine.c_str(), "w")) std::fclose(f);
    if (me == victim) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      for (int r = 0; r < expected; ++r) {
        const std::string theirs = std::string(dir) + "/started." + std::to_string(r);
        while (::access(theirs.c_str(), F_OK) != 0) {
          if (std::chrono::steady_clock::now() > deadline) {
            std::printf("fault-check FAILED (%s, rank %d): rank %d did not start within 10 s\n", mode.c_str(), me, r);
            return 1;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
    }
  }
  if (mode == "rendezvous" && me == victim) start_killer(3);  // forming a team takes milliseconds

  std::optional<aperture::Team> team;
  std::string message = "(no error)";
  try {
    run(mode, team, me == victim);
  } catch (const aperture::Error& e) {
    message = e.what();
    // Had the job watch not ended the wait, it would time out knowing nothing of ranks; the
    // Team would still name the dead rank (and the driver's time limit would fail the run).
    if (message.find("timed out") != std::string::npos && team) {
      try {
        team->barrier();
      } catch (const aperture::Error& then) {
        message += " | the next Team call: " + std::string(then.what());
      }
    }
  } catch (const std::exception& e) {
    message = std::string("not an aperture::Error: ") + e.what();
  }
  if (me == victim) {
    std::printf("fault-check FAILED (%s, rank %d): the victim is still alive: %s\n", mode.c_str(), me, message.c_str());
    return 1;
  }
  if (team && team->size() != expected) {
    std::printf("fault-check FAILED (%s, rank %d): a team of %d rank(s), expected %d\n", mode.c_str(), me, team->size(),
                expected);
    return 1;
  }
  if (!names_rank(message, victim) || message.find("aperture:") == std::string::npos) {
    std::printf("fault-check FAILED (%s, rank %d): expected an aperture::Error naming rank %d, got: %s\n", mode.c_str(),
                me, victim, message.c_str());
    return 1;
  }
  std::printf("fault-check ok (%s, rank %d): %s\n", mode.c_str(), me, message.c_str());
  return 0;
}
