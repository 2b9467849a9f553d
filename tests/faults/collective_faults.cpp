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
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "../common/fault_check.h"

namespace {

using test::expect_error;

int fault(const std::string& mode, aperture::Team& team) {
  const int me = team.rank(), last = team.size() - 1;
  auto provider = aperture::make_provider("shm", team);
  std::string message = "(no error)";
  std::optional<aperture::ErrorCode> code;
  const std::string last_rank = "rank " + std::to_string(last);
  try {
    if (mode == "order") {
      if (me == last) team.barrier();
      else provider->allocate(4096);
    } else if (mode == "skip") {
      if (me == last) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past the others' timeout
        team.barrier();
      } else {
        provider->allocate(4096);
      }
    } else {
      std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
      return 2;
    }
  } catch (const aperture::Error& e) {
    message = e.what();
    code = e.code();
  }
  if (mode == "order")
    return expect_error(mode, me, message, code, aperture::ErrorCode::mismatch,
                        {last_rank, "collective call mismatch", "barrier", "allgather"});
  // The late rank hears the hub's verdict on the call it missed: a timeout too.
  if (me == last)
    return expect_error(mode, me, message, code, aperture::ErrorCode::timeout, {last_rank, "did not arrive", "rank "});
  return expect_error(mode, me, message, code, aperture::ErrorCode::timeout,
                      {last_rank, "did not arrive", "APERTURE_TIMEOUT"});
}

}  // namespace

int main(int argc, char** argv) { return test::run_fault_program(argc, argv, "collective_faults order|skip", fault); }
