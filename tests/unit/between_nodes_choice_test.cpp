// Which path the collectives of a team across nodes exchange data between nodes on
// (src/collectives/between_nodes_choice.h): memory kind x NCCL built x APERTURE_COLLECTIVES_BETWEEN_NODES.
#include <gtest/gtest.h>

#include <string>

#include "aperture/error.h"
#include "collectives/between_nodes_choice.h"

namespace {

using aperture::MemoryKind;
using aperture::collectives::detail::BetweenNodes;
using aperture::collectives::detail::choose_between_nodes;
using Setting = aperture::env::BetweenNodes;

TEST(BetweenNodesChoice, HostMemoryAlwaysTakesMpi) {
  for (bool built : {false, true})
    for (Setting s : {Setting::automatic, Setting::nccl, Setting::mpi})
      EXPECT_EQ(choose_between_nodes(MemoryKind::host, built, s), BetweenNodes::mpi);
}

// auto takes NCCL for GPU memory wherever it is built in, MPI where it is not.
TEST(BetweenNodesChoice, GpuMemoryTakesNcclWhereBuiltUnlessMpiIsAskedFor) {
  EXPECT_EQ(choose_between_nodes(MemoryKind::device, true, Setting::automatic), BetweenNodes::nccl);
  EXPECT_EQ(choose_between_nodes(MemoryKind::device, true, Setting::nccl), BetweenNodes::nccl);
  EXPECT_EQ(choose_between_nodes(MemoryKind::device, true, Setting::mpi), BetweenNodes::mpi);
  EXPECT_EQ(choose_between_nodes(MemoryKind::device, false, Setting::automatic), BetweenNodes::mpi);
  EXPECT_EQ(choose_between_nodes(MemoryKind::device, false, Setting::mpi), BetweenNodes::mpi);
}

TEST(BetweenNodesChoice, NcclAskedForWithoutNcclBuiltIsAnErrorNamingTheFix) {
  try {
    choose_between_nodes(MemoryKind::device, false, Setting::nccl);
    FAIL() << "no error";
  } catch (const aperture::Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.code(), aperture::ErrorCode::unavailable);
    EXPECT_NE(message.find("APERTURE_COLLECTIVES_BETWEEN_NODES=nccl"), std::string::npos) << message;
    EXPECT_NE(message.find("built without NCCL"), std::string::npos) << message;
    EXPECT_NE(message.find("APERTURE_COLLECTIVES_BETWEEN_NODES=mpi"), std::string::npos) << message;
  }
}

TEST(BetweenNodesChoice, NamesAreTheVariableValues) {
  EXPECT_STREQ(aperture::collectives::detail::between_nodes_name(BetweenNodes::nccl), "nccl");
  EXPECT_STREQ(aperture::collectives::detail::between_nodes_name(BetweenNodes::mpi), "mpi");
}

}  // namespace
