#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "world.h"

namespace {
std::unique_ptr<aperture::Team> the_team;
}

aperture::Team& test::world() { return *the_team; }

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
  const int result = RUN_ALL_TESTS();
  the_team.reset();
  return result;
}
