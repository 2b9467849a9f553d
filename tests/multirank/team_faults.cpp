// team_faults MODE: one way a job goes wrong, and what every rank must see.
//
//   mismatch  the last rank allgathers 16 bytes while the others allgather 8
//   timeout   the last rank arrives at a barrier after the timeout (run with APERTURE_TIMEOUT=1)
//   leave     rank 0 leaves the team while the others wait in a barrier
//   die       the last rank kills itself with SIGKILL while the others wait in a barrier
//
// Each surviving rank prints "fault-check ok: <message>" and exits 0 when it got an
// aperture::Error whose message names the right rank and cause, and exits 1 otherwise, so a
// hang, a wrong message or silent success all fail the test.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "../common/fault_check.h"

namespace {

using test::expect_error;

int fault(const std::string& mode, aperture::Team& team) {
  const int me = team.rank(), last = team.size() - 1;
  team.barrier();
  std::string message = "(no error)";
  std::optional<aperture::ErrorCode> code;
  const std::string last_rank = "rank " + std::to_string(last);
  try {
    if (mode == "mismatch") {
      char mine[16] = {}, all[16 * 64];
      team.allgather(mine, all, me == last ? 16 : 8);
    } else if (mode == "timeout") {
      if (me == last) std::this_thread::sleep_for(std::chrono::milliseconds(1700));
      team.barrier();
    } else if (mode == "leave") {
      if (me == 0) {
        { auto gone = std::move(team); }  // destroys the Team: rank 0 leaves
        std::printf("fault-check ok (leave, rank 0): left\n");
        return 0;
      }
      team.barrier();
    } else if (mode == "die") {
      if (me == last) ::kill(::getpid(), SIGKILL);
      team.barrier();
    } else {
      std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
      return 2;
    }
  } catch (const aperture::Error& e) {
    message = e.what();
    code = e.code();
  }
  using aperture::ErrorCode;
  if (mode == "mismatch")
    return expect_error("mismatch", me, message, code, ErrorCode::mismatch, {"mismatch", "16 bytes", "8 bytes", last_rank});
  if (mode == "timeout") {
    if (me == last) return expect_error("timeout", me, message, code, ErrorCode::timeout, {"did not arrive", last_rank});
    return expect_error("timeout", me, message, code, ErrorCode::timeout, {"did not arrive", last_rank, "APERTURE_TIMEOUT"});
  }
  // Leaving while the others wait is a collective call the others make and rank 0 does not.
  if (mode == "leave") return expect_error("leave", me, message, code, ErrorCode::mismatch, {"rank 0", "left the team"});
  return expect_error("die", me, message, code, ErrorCode::peer_lost, {last_rank});
}

}  // namespace

int main(int argc, char** argv) {
  return test::run_fault_program(argc, argv, "team_faults mismatch|timeout|leave|die", fault);
}
