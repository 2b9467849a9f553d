// Which ranks of one machine took the same GPU, by UUID (src/providers/cuda/shared_gpu.h): what
// nvshmem and nccl refuse when they start. Pure logic, no CUDA: the UUIDs are written here as a
// launcher's layouts produce them.
#include <gtest/gtest.h>

#include <vector>

#include "providers/cuda/shared_gpu.h"

namespace {

using aperture::detail::GpuUuid;
using aperture::detail::gpu_uuid_text;
using aperture::detail::ranks_sharing_a_gpu;
using aperture::detail::shared_gpu_problem;

// A UUID whose bytes differ per GPU and per byte.
GpuUuid gpu(int id) {
  GpuUuid uuid{};
  for (std::size_t i = 0; i < uuid.size(); ++i) uuid[i] = static_cast<unsigned char>(id * 17 + i + 1);
  return uuid;
}

TEST(SharedGpu, RanksWithAGpuEachShareNone) {
  // Every rank sees all four GPUs and takes local_rank % 4; or (Slurm's --gpus-per-task=1) each
  // sees only its own as device 0: either way four UUIDs, no pair.
  const std::vector<GpuUuid> uuids{gpu(0), gpu(1), gpu(2), gpu(3)};
  const std::vector<int> node_of{0, 0, 0, 0};
  EXPECT_FALSE(ranks_sharing_a_gpu(uuids, node_of).has_value());
}

TEST(SharedGpu, TwoRanksOnOneGpuAreNamed) {
  // Six ranks on a machine with four GPUs, all visible: ranks 4 and 5 take GPUs 0 and 1 again.
  const std::vector<GpuUuid> uuids{gpu(0), gpu(1), gpu(2), gpu(3), gpu(0), gpu(1)};
  const std::vector<int> node_of{0, 0, 0, 0, 0, 0};
  const auto shared = ranks_sharing_a_gpu(uuids, node_of);
  ASSERT_TRUE(shared.has_value());
  EXPECT_EQ(shared->first_rank, 0);
  EXPECT_EQ(shared->second_rank, 4);
  // A wrapper that gives two ranks the same CUDA_VISIBLE_DEVICES: the later pair is found too.
  const std::vector<GpuUuid> bound{gpu(0), gpu(1), gpu(2), gpu(2)};
  const auto twice = ranks_sharing_a_gpu(bound, std::vector<int>{0, 0, 0, 0});
  ASSERT_TRUE(twice.has_value());
  EXPECT_EQ(twice->first_rank, 2);
  EXPECT_EQ(twice->second_rank, 3);
}

TEST(SharedGpu, RanksOfOtherNodesNeverShare) {
  // Simulated nodes on one machine's GPU (the proxy tests' two "nodes"): one UUID, two nodes.
  const std::vector<GpuUuid> uuids{gpu(0), gpu(0)};
  EXPECT_FALSE(ranks_sharing_a_gpu(uuids, std::vector<int>{0, 1}).has_value());
  // 2x2: each node's ranks on GPUs 0 and 1 of one machine; sharing only within a node counts.
  const std::vector<GpuUuid> grid{gpu(0), gpu(1), gpu(0), gpu(1)};
  EXPECT_FALSE(ranks_sharing_a_gpu(grid, std::vector<int>{0, 0, 1, 1}).has_value());
  const auto within = ranks_sharing_a_gpu(grid, std::vector<int>{0, 1, 0, 1});
  ASSERT_TRUE(within.has_value());
  EXPECT_EQ(within->first_rank, 0);
  EXPECT_EQ(within->second_rank, 2);
}

TEST(SharedGpu, RanksWithoutAGpuShareNothing) {
  // Zeros: the rank took no GPU (it says why on its own); two such ranks are not a shared GPU.
  const std::vector<GpuUuid> uuids{GpuUuid{}, GpuUuid{}, gpu(3)};
  EXPECT_FALSE(ranks_sharing_a_gpu(uuids, std::vector<int>{0, 0, 0}).has_value());
}

TEST(SharedGpu, TheProblemNamesRanksGpuAndWaysOut) {
  GpuUuid uuid{};
  for (std::size_t i = 0; i < uuid.size(); ++i) uuid[i] = static_cast<unsigned char>(0xa0 + i);
  EXPECT_EQ(gpu_uuid_text(uuid), "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
  const std::string text = shared_gpu_problem("nccl", {1, 3}, uuid);
  for (const char* part : {"ranks 1 and 3 run on one machine and both took GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf",
                           "the nccl provider needs one GPU per rank", "CUDA_VISIBLE_DEVICES per rank",
                           "srun --gpus-per-task=1"})
    EXPECT_NE(text.find(part), std::string::npos) << part << " not in: " << text;
}

}  // namespace
