// The nccl provider's kernel: a window's peer table from NCCL 2.28's device API.
#include <nccl.h>
#include <nccl_device.h>

#include <string>

#include "common/cuda_check.h"
#include "common/nccl_check.h"
#include "providers/foreign_window/nccl_peer_table.h"

namespace aperture::detail::nccl_device {

namespace {

// One thread per entry. A peer outside this rank's LSA team has no load/store mapping, but
// ncclGetPeerPointer would still compute an address for it: membership is checked first.
__global__ void fill_peer_table_kernel(ncclWindow_t window, ncclDevComm dev_comm, std::int64_t local_base,
                                       std::int64_t* table) {
  const int p = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int world = dev_comm.nRanks;
  if (p > world) return;
  if (p == world) {
    table[p] = reinterpret_cast<std::int64_t>(ncclGetLocalPointer(window, 0));
    return;
  }
  if (p == dev_comm.rank) {
    table[p] = local_base;
    return;
  }
  const bool load_store = ncclTeamRankIsMember(ncclTeamLsa(dev_comm), ncclTeamWorld(dev_comm), p);
  table[p] = load_store ? reinterpret_cast<std::int64_t>(ncclGetPeerPointer(window, 0, p)) : 0;
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

std::string DeviceComm::fill_peer_table(ncclWindow_t window, const void* local_base, std::int64_t* device_table,
                                        cudaStream_t stream) const {
  const int entries = impl_->dev_comm.nRanks + 1;
  constexpr int kThreads = 128;
  fill_peer_table_kernel<<<(entries + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      window, impl_->dev_comm, reinterpret_cast<std::int64_t>(local_base), device_table);
  if (auto why = APERTURE_CUDA_TRY(cudaGetLastError()); !why.empty()) return "launching the peer-table kernel: " + why;
  return APERTURE_CUDA_TRY(cudaStreamSynchronize(stream));
}

}  // namespace aperture::detail::nccl_device
