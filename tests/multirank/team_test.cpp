#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <vector>

#include "world.h"

namespace {

using test::world;

TEST(Team, ShapeMatchesTheLauncher) {
  auto& team = world();
  EXPECT_GE(team.rank(), 0);
  EXPECT_LT(team.rank(), team.size());
  EXPECT_GE(team.local_rank(), 0);
  EXPECT_LT(team.local_rank(), team.local_size());
  EXPECT_LE(team.local_size(), team.size());
  if (const char* size = std::getenv("APERTURE_WORLD_SIZE")) EXPECT_EQ(team.size(), std::atoi(size));
  if (const char* size = std::getenv("OMPI_COMM_WORLD_SIZE")) EXPECT_EQ(team.size(), std::atoi(size));
  for (int r = 0; r < team.size(); ++r) EXPECT_TRUE(team.same_node(r)) << "every test rank runs on this machine";
  EXPECT_FALSE(team.same_node(team.size()));
}

TEST(Team, AllgatherPutsEveryRanksBytesInRankOrder) {
  auto& team = world();
  for (std::size_t count : {std::size_t{1}, std::size_t{3}, std::size_t{1000}, std::size_t{100000}}) {
    std::vector<std::int64_t> mine(count), all(count * team.size());
    for (std::size_t i = 0; i < count; ++i) mine[i] = test::pattern<std::int64_t>(team.rank(), i);
    team.allgather(mine.data(), all.data(), count * sizeof(std::int64_t));
    for (int r = 0; r < team.size(); ++r)
      for (std::size_t i = 0; i < count; ++i)
        ASSERT_EQ(all[r * count + i], test::pattern<std::int64_t>(r, i)) << "rank " << r << " element " << i;
  }
  team.allgather(nullptr, nullptr, 0);  // zero bytes: a pure synchronisation
}

TEST(Team, BroadcastFromEveryRoot) {
  auto& team = world();
  for (int root = 0; root < team.size(); ++root) {
    std::vector<double> buffer(777);
    for (std::size_t i = 0; i < buffer.size(); ++i)
      buffer[i] = team.rank() == root ? test::pattern<double>(root, i, 1) : -1.0;
    team.broadcast(buffer.data(), buffer.size() * sizeof(double), root);
    for (std::size_t i = 0; i < buffer.size(); ++i) ASSERT_EQ(buffer[i], test::pattern<double>(root, i, 1));
  }
  EXPECT_THROW(team.broadcast(nullptr, 0, team.size()), aperture::Error);
  EXPECT_THROW(team.broadcast(nullptr, 0, -1), aperture::Error);
}

TEST(Team, BarriersInALoop) {
  for (int i = 0; i < 200; ++i) world().barrier();
}

TEST(Team, CheckSamePassesWhenEveryRankAgrees) {
  world().check_same("agreeing call", {{"bytes", 4096}, {"alignment", 256}});
}

TEST(Team, CheckSameNamesTheRanksThatDiffer) {
  auto& team = world();
  if (team.size() < 2) GTEST_SKIP() << "a mismatch needs two ranks";
  const std::uint64_t bytes = team.rank() == team.size() - 1 ? 8192 : 4096;
  const std::string message = test::error_of([&] { team.check_same("allocate", {{"bytes", bytes}}); });
  EXPECT_NE(message.find("mismatch"), std::string::npos) << message;
  EXPECT_NE(message.find("bytes=8192"), std::string::npos) << message;
  EXPECT_NE(message.find("bytes=4096"), std::string::npos) << message;
  EXPECT_NE(message.find("rank " + std::to_string(team.size() - 1) + ":"), std::string::npos) << message;
  team.barrier();  // the team is still usable: the check caught it before anything diverged
}

}  // namespace
