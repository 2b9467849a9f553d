// collective_faults MODE: bad input that ends the job, and what every rank must see.
//
//   order  the last rank calls barrier() while the others allocate (a Team allgather inside):
//          the hub sees two different calls at the same call number and fails every rank
//   skip   the last rank skips an allocate the others make (run with APERTURE_TIMEOUT=1):
//          the others time out naming it; the last rank then fails on its next Team call
//
// Each rank prints "fault-check ok (MODE, rank R): <message>" and exits 0 when it got an
// aperture::Error with the expected content, and exits 1 otherwise (a hang is caught by the
// test's timeout and the launcher's --timeout).
#include <aperture/aperture.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: collective_faults order|skip\n");
    return 2;
  }
  const std::string mode = argv[1];
  auto team = aperture::Team::from_env();
  const int me = team.rank(), last = team.size() - 1;
  if (team.size() < 2) {
    std::printf("fault-check skipped: mode %s needs two ranks\n", mode.c_str());
    return 0;
  }
  auto provider = aperture::make_provider("shm", team);
  std::string message = "(no error)";
  std::vector<std::string> needles;
  try {
    if (mode == "order") {
      needles = {"collective call mismatch", "barrier", "allgather"};
      if (me == last) team.barrier();
      else provider->allocate(4096);
    } else if (mode == "skip") {
      if (me == last) {
        needles = {"did not arrive", "rank " };
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past the others' timeout
        team.barrier();
      } else {
        needles = {"did not arrive", "APERTURE_TIMEOUT"};
        provider->allocate(4096);
      }
    } else {
      std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
      return 2;
    }
  } catch (const aperture::Error& e) {
    message = e.what();
  }
  const std::string last_rank = "rank " + std::to_string(last);
  bool ok = message.find(last_rank) != std::string::npos;
  for (const auto& needle : needles) ok = ok && message.find(needle) != std::string::npos;
  std::printf("fault-check %s (%s, rank %d): %s\n", ok ? "ok" : "FAILED", mode.c_str(), me, message.c_str());
  return ok ? 0 : 1;
}
