// tests/common/fault_check.h — what the fault programs (team_faults, collective_faults) share: one
// MODE argument, a team of exactly the expected size (APERTURE_TEST_EXPECTED_RANKS, which CTest
// sets for every multi-rank test: a team of one, or of the wrong size, fails instead of passing
// with no peer to fault), and the verdict line on the error each rank got.
//
// A rank prints "fault-check ok (MODE, rank R): <message>" and exits 0 when the message holds
// every expected part (and the error has the expected code), or "fault-check FAILED (MODE, rank R): ..." and exits 1 otherwise, so a
// wrong message or silent success fails the test (a hang is caught by the timeouts).
#pragma once

#include <aperture/aperture.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>

namespace test {

// 0 when `message` holds every needle, else 1; prints the verdict line either way.
inline int expect_error(const std::string& mode, int rank, const std::string& message,
                        std::initializer_list<std::string> needles) {
  for (const auto& needle : needles)
    if (message.find(needle) == std::string::npos) {
      std::fprintf(stderr, "fault-check FAILED (%s, rank %d): expected '%s' in: %s\n", mode.c_str(), rank,
                   needle.c_str(), message.c_str());
      return 1;
    }
  std::printf("fault-check ok (%s, rank %d): %s\n", mode.c_str(), rank, message.c_str());
  return 0;
}

// As above, and the error's code must be `expected` (`got` is nullopt when nothing was thrown).
inline int expect_error(const std::string& mode, int rank, const std::string& message,
                        std::optional<aperture::ErrorCode> got, aperture::ErrorCode expected,
                        std::initializer_list<std::string> needles) {
  if (got != expected) {
    std::fprintf(stderr, "fault-check FAILED (%s, rank %d): expected code %s, got %s: %s\n", mode.c_str(), rank,
                 std::string(aperture::to_string(expected)).c_str(),
                 got ? std::string(aperture::to_string(*got)).c_str() : "no error", message.c_str());
    return 1;
  }
  return expect_error(mode, rank, message, needles);
}

// The rank count the test was registered with (APERTURE_TEST_EXPECTED_RANKS), or -1 when unset
// or not a number of at least 2 (a fault needs a peer).
inline int expected_ranks() {
  const char* text = std::getenv("APERTURE_TEST_EXPECTED_RANKS");
  const int n = text != nullptr ? std::atoi(text) : -1;
  return n >= 2 ? n : -1;
}

// Runs `fault(mode, team)` on this rank and returns its exit status; 2 when the arguments are not
// one MODE (printing `usage`) or APERTURE_TEST_EXPECTED_RANKS is not set to 2 or more; 1 when
// the team is not of that size.
template <class Fault>
int run_fault_program(int argc, char** argv, const char* usage, Fault&& fault) {
  const int expected = expected_ranks();
  if (argc != 2 || expected < 0) {
    std::fprintf(stderr, "usage: APERTURE_TEST_EXPECTED_RANKS=N (2 or more) %s\n", usage);
    return 2;
  }
  const std::string mode = argv[1];
  auto team = aperture::Team::from_env();
  if (team.size() != expected) {
    std::fprintf(stderr, "fault-check FAILED (%s, rank %d): a team of %d rank(s), expected %d\n", mode.c_str(),
                 team.rank(), team.size(), expected);
    return 1;
  }
  return fault(mode, team);
}

}  // namespace test
