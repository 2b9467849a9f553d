// tests/conformance/main.cpp — the conformance suite's main: forms the team, runs the tests, and
// exits 77 when every test that ran was skipped (no provider of the selection can run here:
// CTest's SKIP_RETURN_CODE then shows the run as skipped, with each reason in its output).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "provider_fixture.h"

namespace {
std::unique_ptr<aperture::Team> the_team;
constexpr int kAllSkipped = 77;
}  // namespace

aperture::Team& conformance::world() { return *the_team; }

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  try {
    the_team = std::make_unique<aperture::Team>(aperture::Team::from_env());
  } catch (const aperture::Error& e) {
    std::fprintf(stderr, "cannot form the team: %s\n", e.what());
    return 2;
  }
  // One full report is enough; the other ranks report only failures.
  if (the_team->rank() != 0) ::testing::GTEST_FLAG(brief) = true;
  int result = RUN_ALL_TESTS();
  const auto& unit = *::testing::UnitTest::GetInstance();
  if (result == 0 && unit.test_to_run_count() > 0 && unit.skipped_test_count() == unit.test_to_run_count()) {
    std::printf("SKIP: all %d tests skipped here (the reasons are above)\n", unit.test_to_run_count());
    result = kAllSkipped;
  }
  try {
    conformance::drop_shared_providers();  // before the team they were made on
  } catch (const aperture::Error& e) {
    std::fprintf(stderr, "releasing the providers failed: %s\n", e.what());
    result = 1;
  }
  the_team.reset();
  return result;
}
