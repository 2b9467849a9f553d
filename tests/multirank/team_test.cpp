#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <numeric>
#include <string>
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

// `aperture launch` sets torchrun's variables too, so torch.distributed.init_process_group works
// in its ranks; they agree with the Team, and MASTER_PORT is one free loopback port for the job.
TEST(Team, LaunchSetsTorchrunsVariables) {
  auto& team = world();
  // (--mpi: the launcher's rank shim sets them from Open MPI's; plain mpirun sets none)
  if (team.launched_by() != "aperture launch" && std::getenv("MASTER_PORT") == nullptr)
    GTEST_SKIP() << "ranks started by " << team.launched_by() << ", not by aperture launch";
  const auto number = [](const char* name) {
    const char* text = std::getenv(name);
    EXPECT_NE(text, nullptr) << name << " is not set";
    return text ? std::atoi(text) : -1;
  };
  EXPECT_EQ(number("RANK"), team.rank());
  EXPECT_EQ(number("WORLD_SIZE"), team.size());
  EXPECT_EQ(number("LOCAL_RANK"), team.local_rank());
  EXPECT_EQ(number("LOCAL_WORLD_SIZE"), team.local_size());
  const char* address = std::getenv("MASTER_ADDR");
  ASSERT_NE(address, nullptr);
  EXPECT_EQ(std::string(address), "127.0.0.1");
  const int port = number("MASTER_PORT");
  ASSERT_GT(port, 0);
  ASSERT_LE(port, 65535);
  std::vector<int> ports(static_cast<std::size_t>(team.size()));
  team.allgather(&port, ports.data(), sizeof port);
  for (int r = 0; r < team.size(); ++r) EXPECT_EQ(ports[r], port) << "rank " << r << " got another MASTER_PORT";
  if (team.rank() == 0) {  // torch's rank 0 listens there: nothing else may hold it
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in where{};
    where.sin_family = AF_INET;
    where.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    where.sin_port = htons(static_cast<std::uint16_t>(port));
    EXPECT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&where), sizeof where), 0) << "MASTER_PORT " << port << " is taken";
    ::close(fd);
  }
  team.barrier();
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
