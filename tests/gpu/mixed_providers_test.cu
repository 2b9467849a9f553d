// tests/gpu/mixed_providers_test.cu — two foreign allocators' memory in ONE kernel.
//
// An NVSHMEM buffer the program took from nvshmem_malloc itself (imported: described with the
// nvshmem provider's symmetric_address_map) and an NCCL window (a view of it, described with the
// nccl provider's symmetric_address_map) are read and written in the same loop, each through
// its own table. No aperture heap is in the process.
//
//     aperture launch -n 2 -- mixed_providers_test
#include <nvshmem_host.h>

#include <string>

#include "peer_kernels.cuh"

namespace {

constexpr std::size_t kCount = std::size_t{1} << 13;  // elements per slot
constexpr int kBlocks = 32;
constexpr int kThreads = 256;
using gputest::pattern;

// The job on nvshmem memory (skipping where NVSHMEM or NCCL cannot run here, or where ranks
// would share a GPU: both libraries take one GPU per rank). No aperture heap is made.
std::unique_ptr<gputest::Job> start() {
  gputest::require("mixed_providers_test", {"nvshmem", "nccl"});
  auto job = gputest::join_team();
  int count = 0;
  APERTURE_CUDA_CHECK(cudaGetDeviceCount(&count), "test");
  if (job->team.local_size() > count)  // every rank of this machine sees the same and skips
    gputest::skip("mixed_providers_test: " + std::to_string(job->team.local_size()) + " ranks on this machine but " +
                  std::to_string(count) + " GPU(s); nvshmem and nccl need one GPU per rank");
  job->provider = aperture::make_provider("nvshmem", job->team);
  return job;
}

// For every peer direct in both: nccl_dst[me] on p = p's nv_src + me + 1, and
// nv_dst[me] on p = p's nccl_src + 2 (me + 1).
__global__ void across_providers(const std::int64_t* nv_src, std::int64_t* nv_dst, const std::int64_t* nv_table,
                                 const std::int64_t* nccl_src, std::int64_t* nccl_dst, const std::int64_t* nccl_table,
                                 int me, int n) {
  for (int p = 0; p < n; ++p) {
    if (nv_table[p] == 0 || nccl_table[p] == 0) continue;
    for (std::size_t i = gputest::thread_index(); i < kCount; i += gputest::thread_count()) {
      const std::int64_t x = aperture::load(&nv_src[i], me, p, nv_table);
      aperture::store(&nccl_dst[me * kCount + i], x + me + 1, me, p, nccl_table);
      const std::int64_t y = aperture::load(&nccl_src[i], me, p, nccl_table);
      aperture::store(&nv_dst[me * kCount + i], y + 2 * (me + 1), me, p, nv_table);
    }
  }
}

}  // namespace

TEST(MixedProviders, NvshmemAndNcclMemoryInOneKernel) {
  gputest::Job& job = gputest::job();
  const int me = job.me, n = job.n;
  auto nccl = aperture::make_provider("nccl", job.team);

  // NVSHMEM: [src: kCount][dst: n * kCount], from nvshmem_malloc, never from allocate.
  const std::size_t nv_bytes = (1 + static_cast<std::size_t>(n)) * kCount * sizeof(std::int64_t);
  auto* nv = static_cast<std::int64_t*>(nvshmem_malloc(nv_bytes));
  CHECK(nv != nullptr);
  if (nv == nullptr) return;
  APERTURE_CUDA_CHECK(cudaMemset(nv, 0, nv_bytes), "test");
  const aperture::SymmetricAddressMap nv_map = job.provider->symmetric_address_map(nv, nv_bytes);
  // NCCL: one window holding a header, src and dst; described as a view past the header.
  constexpr std::size_t kHeader = 512;
  aperture::Allocation window = nccl->allocate(kHeader * sizeof(std::int64_t) + nv_bytes);
  auto* nccl_base = window.as<std::int64_t>() + kHeader;
  const aperture::SymmetricAddressMap nccl_map = nccl->symmetric_address_map(nccl_base, nv_bytes);

  std::vector<std::uint8_t> mine(n), nv_direct(n), nccl_direct(n);
  for (int p = 0; p < n; ++p) {
    nv_direct[p] = nv_map.is_direct(p) ? 1 : 0;
    nccl_direct[p] = nccl_map.is_direct(p) ? 1 : 0;
    mine[p] = nv_direct[p] && nccl_direct[p];
  }
  // Which peers are direct is the hardware's say, not the providers' (a table of zeros fails).
  const std::vector<std::uint8_t> hardware = test::expected_gpu_reach(job.team);
  const std::string nv_differs = test::reach_mismatch(nv_direct, hardware);
  const std::string nccl_differs = test::reach_mismatch(nccl_direct, hardware);
  CHECK_MSG(nv_differs.empty(), "nvshmem's direct peers are the hardware's:" + nv_differs);
  CHECK_MSG(nccl_differs.empty(), "nccl's direct peers are the hardware's:" + nccl_differs);
  std::vector<std::uint8_t> all(static_cast<std::size_t>(n) * n);
  job.team.allgather(mine.data(), all.data(), n);
  const auto reaches = [&](int s, int t) { return all[static_cast<std::size_t>(s) * n + t] != 0; };

  gputest::fill<<<kBlocks, kThreads>>>(nv, kCount, me, 3);
  gputest::fill<<<kBlocks, kThreads>>>(nccl_base, kCount, me, 4);
  gputest::launched("fill");
  job.sync();
  across_providers<<<kBlocks, kThreads>>>(nv, nv + kCount, nv_map.peer_bases(), nccl_base, nccl_base + kCount,
                                          nccl_map.peer_bases(), me, n);
  gputest::launched("across_providers");
  job.sync();

  const auto nv_host = gputest::to_host(nv + kCount, n * kCount);
  const auto nccl_host = gputest::to_host(nccl_base + kCount, n * kCount);
  std::vector<std::int64_t> nv_expected(n * kCount, 0), nccl_expected(n * kCount, 0);
  for (int s = 0; s < n; ++s)
    if (reaches(s, me))
      for (std::size_t i = 0; i < kCount; ++i) {
        nccl_expected[s * kCount + i] = pattern<std::int64_t>(me, i, 3) + s + 1;
        nv_expected[s * kCount + i] = pattern<std::int64_t>(me, i, 4) + 2 * (s + 1);
      }
  CHECK_RANGE(nccl_host.data(), nccl_expected, "NCCL window written with values loaded from NVSHMEM memory");
  CHECK_RANGE(nv_host.data(), nv_expected, "NVSHMEM memory written with values loaded from an NCCL window");
  CHECK(gputest::to_host(window.as<std::int64_t>(), kHeader) == std::vector<std::int64_t>(kHeader, 0));
  // Each table translates its own memory only: the NCCL view's table is not the NVSHMEM one.
  CHECK(nv_map.peer_bases() != nccl_map.peer_bases());
  job.sync();
  nccl->free(window);
  nvshmem_free(nv);
  nccl.reset();
}

int main(int argc, char** argv) { return gputest::run_tests(argc, argv, "mixed_providers_test", start); }
