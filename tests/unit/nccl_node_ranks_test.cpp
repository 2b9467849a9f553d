// Which team ranks the nccl provider's communicator holds (one node's), in which order, and who
// makes its unique id: the mapping its table kernel uses to put communicator ranks' entries at
// team ranks. Pure logic, no NCCL.
#include <gtest/gtest.h>

#include <vector>

#include "aperture/error.h"
#include "providers/foreign_window/nccl_node_ranks.h"

namespace {

using aperture::detail::node_communicator_ranks;

TEST(NcclNodeRanks, OneNodeIsTheWholeTeamInRankOrder) {
  const std::vector<int> node_of{0, 0, 0, 0};
  for (int me = 0; me < 4; ++me) {
    const auto ranks = node_communicator_ranks(node_of, me);
    EXPECT_EQ(ranks.team_rank_of, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(ranks.rank, me);
    EXPECT_EQ(ranks.size(), 4);
    EXPECT_EQ(ranks.id_maker(), 0);
  }
}

TEST(NcclNodeRanks, ConsecutiveNodesHoldTheirOwnBlock) {
  const std::vector<int> node_of{0, 0, 1, 1, 1};
  const auto third = node_communicator_ranks(node_of, 3);
  EXPECT_EQ(third.team_rank_of, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(third.rank, 1);
  EXPECT_EQ(third.id_maker(), 2);
  const auto first = node_communicator_ranks(node_of, 1);
  EXPECT_EQ(first.team_rank_of, (std::vector<int>{0, 1}));
  EXPECT_EQ(first.rank, 1);
  EXPECT_EQ(first.id_maker(), 0);
}

// mpirun --map-by node deals ranks out round robin: a node's ranks are not consecutive.
TEST(NcclNodeRanks, RoundRobinNodesMapBackToScatteredTeamRanks) {
  const std::vector<int> node_of{0, 1, 2, 0, 1, 2, 0};
  const std::vector<std::vector<int>> expected{{0, 3, 6}, {1, 4}, {2, 5}};
  for (int me = 0; me < static_cast<int>(node_of.size()); ++me) {
    const auto ranks = node_communicator_ranks(node_of, me);
    const auto& want = expected[static_cast<std::size_t>(node_of[static_cast<std::size_t>(me)])];
    EXPECT_EQ(ranks.team_rank_of, want) << "rank " << me;
    EXPECT_EQ(ranks.team_rank_of[static_cast<std::size_t>(ranks.rank)], me) << "rank " << me;
    EXPECT_EQ(ranks.id_maker(), want.front()) << "rank " << me;
  }
}

TEST(NcclNodeRanks, OneRankPerNodeIsACommunicatorOfOne) {
  const std::vector<int> node_of{0, 1};
  const auto second = node_communicator_ranks(node_of, 1);
  EXPECT_EQ(second.team_rank_of, (std::vector<int>{1}));
  EXPECT_EQ(second.rank, 0);
  EXPECT_EQ(second.id_maker(), 1);
}

TEST(NcclNodeRanks, ARankOutsideTheTeamIsRefused) {
  const std::vector<int> node_of{0, 1};
  EXPECT_THROW((void)node_communicator_ranks(node_of, 2), aperture::Error);
  EXPECT_THROW((void)node_communicator_ranks(node_of, -1), aperture::Error);
}

TEST(NcclNodeRanks, ATeamOfOneIsItsOwnCommunicator) {
  auto team = aperture::Team::single();
  const auto ranks = node_communicator_ranks(team);
  EXPECT_EQ(ranks.team_rank_of, (std::vector<int>{0}));
  EXPECT_EQ(ranks.rank, 0);
}

}  // namespace
