// The nccl provider's kernel: a window's peer table from NCCL 2.28's device API.
#include <nccl.h>
#include <nccl_device.h>

#include <cstddef>
#include <string>

#include "common/cuda_check.h"
#include "common/nccl_check.h"
#include "providers/foreign_window/nccl_peer_table.h"

namespace aperture::detail::nccl_device {

namespace {

// One thread per communicator rank, and one for NCCL's local mapping; the table was zeroed
// first, so team ranks outside the communicator stay 0. A peer outside this rank's LSA team has
// no load/store mapping, but ncclGetPeerPointer would still compute an address for it:
// membership is checked first.
__global__ void fill_peer_table_kernel(ncclWindow_t window, ncclDevComm dev_comm, std::int64_t local_base,
                                       const int* team_rank_of, int team_size, std::int64_t* table) {
  const int p = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int world = dev_comm.nRanks;
  if (p > world) return;
  if (p == world) {
    table[team_size] = reinterpret_cast<std::int64_t>(ncclGetLocalPointer(window, 0));
    return;
  }
  const int entry = team_rank_of[p];
  if (p == dev_comm.rank) {
    table[entry] = local_base;
    return;
  }
  const bool load_store = ncclTeamRankIsMember(ncclTeamLsa(dev_comm), ncclTeamWorld(dev_comm), p);
  table[entry] = load_store ? reinterpret_cast<std::int64_t>(ncclGetPeerPointer(window, 0, p)) : 0;
}

}  // namespace

struct DeviceComm::Impl {
  ncclDevComm dev_comm{};
};

DeviceComm::DeviceComm(ncclComm_t comm, std::unique_ptr<Impl> impl) : comm_(comm), impl_(std::move(impl)) {}

std::string DeviceComm::create(ncclComm_t comm, std::unique_ptr<DeviceComm>& out) {
  auto impl = std::make_unique<Impl>();
  // Nothing beyond the window pointers: no barriers, no multimem (never multicast), no GIN.
  ncclDevCommRequirements requirements{};
  requirements.lsaMultimem = false;
  if (const ncclResult_t rc = ncclDevCommCreate(comm, &requirements, &impl->dev_comm); rc != ncclSuccess)
    return nccl_failure(rc, "ncclDevCommCreate(comm, {no barriers, no multimem}, &dev_comm)", comm);
  out.reset(new DeviceComm(comm, std::move(impl)));
  return {};
}

DeviceComm::~DeviceComm() {
  if (comm_ != nullptr) (void)ncclDevCommDestroy(comm_, &impl_->dev_comm);
}

int DeviceComm::world_rank() const { return impl_->dev_comm.rank; }
int DeviceComm::world_size() const { return impl_->dev_comm.nRanks; }
int DeviceComm::lsa_rank() const { return impl_->dev_comm.lsaRank; }
int DeviceComm::lsa_size() const { return impl_->dev_comm.lsaSize; }

std::string DeviceComm::fill_peer_table(ncclWindow_t window, const void* local_base, const int* team_rank_of,
                                        int team_size, std::int64_t* device_table, cudaStream_t stream) const {
  if (auto why = APERTURE_CUDA_TRY(
          cudaMemsetAsync(device_table, 0, (static_cast<std::size_t>(team_size) + 1) * sizeof(std::int64_t), stream));
      !why.empty())
    return "zeroing the peer table: " + why;
  const int threads_needed = impl_->dev_comm.nRanks + 1;
  constexpr int kThreads = 128;
  fill_peer_table_kernel<<<(threads_needed + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      window, impl_->dev_comm, reinterpret_cast<std::int64_t>(local_base), team_rank_of, team_size, device_table);
  if (auto why = APERTURE_CUDA_TRY(cudaGetLastError()); !why.empty()) return "launching the peer-table kernel: " + why;
  return APERTURE_CUDA_TRY(cudaStreamSynchronize(stream));
}

}  // namespace aperture::detail::nccl_device
