// The "cuda-ipc" provider: aperture's own symmetric heap in GPU memory.
//
// Each rank takes one GPU (local_rank % device count), makes its whole heap with a single
// cudaMalloc, and exports it with cudaIpcGetMemHandle. Every rank opens every same-machine
// peer's handle (cudaIpcOpenMemHandle), so the peer's heap is mapped in this process; a peer on
// another machine, or on a GPU this one cannot reach (no P2P, not visible to this process), has
// table entry 0. Allocation offsets are identical on every rank (SymmetricHeap is
// deterministic), so one context-wide table serves every allocation: the heap is linear.
//
// Each SymmetricAddressMap carries its table in device memory (kernels read it there) and in
// host memory. The device copy is a small cudaMalloc freed with the last copy of the map;
// cudaFree waits for the device, so a kernel still reading a table is never left with freed
// memory. Build maps once and keep them: a map costs a cudaMalloc and a copy.
//
// Two ranks on one GPU (more ranks than GPUs): a process cannot open its own handle, but another
// process on the same GPU can (seen on 2x H200, driver 580: docs/TESTING.md), and such a peer
// needs no peer access (it is the same device); such peers are opened like any other and are
// direct. Should a driver refuse, start-up fails on every rank with the call and the advice to
// give each rank its own GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "aperture/error.h"
#include "aperture/provider.h"
#include "aperture/team.h"
#include "common/cuda_check.h"
#include "common/env.h"
#include "common/format.h"
#include "engines/engine_attachment.h"
#include "providers/cuda/current_device.h"
#include "providers/cuda/foreign_gpu.h"
#include "providers/cuda/gpu_selection.h"
#include "providers/own_heap/linear_heap_provider.h"
#include "providers/provider_common.h"
#include "providers/registry.h"

namespace aperture::detail {

namespace {

// Allocations may ask for any power-of-two alignment up to the alignment every rank's heap base
// has in every process (cudaMalloc gives 2 MiB for large blocks), and never more than this.
constexpr std::size_t kMaxAlignmentCap = std::size_t{2} << 20;

// What each rank tells the others at start-up.
struct Published {
  cudaIpcMemHandle_t handle;  // meaningful when has_handle
  char uuid[16];              // the GPU's UUID: ordinals differ between processes, UUIDs do not
  std::int32_t has_handle;
  std::int32_t device;        // ordinal in the publisher's process, for messages
};
static_assert(std::is_trivially_copyable_v<Published>, "Published crosses processes as bytes");

std::size_t lowest_set_bit(std::uint64_t x) { return x == 0 ? 0 : static_cast<std::size_t>(x & (~x + 1)); }

class CudaIpcProvider final : public LinearHeapProvider {
 public:
  explicit CudaIpcProvider(Team& team) : CudaIpcProvider(team, env::gpu_heap_size(env::kCudaIpcHeapDefault)) {}

  ~CudaIpcProvider() override { release(); }

  MemoryKind memory_kind() const override { return MemoryKind::device; }

 private:
  CudaIpcProvider(Team& team, std::size_t heap_bytes)
      : LinearHeapProvider(team, HeapNames{"cuda-ipc", "GPU heap", "APERTURE_GPU_HEAP_SIZE"}, heap_bytes),
        heap_bytes_(heap_bytes) {
    team_.check_same("cuda-ipc provider start", {{"heap_bytes", heap_bytes_}});
    const int me = team_.rank();
    bases_.assign(team_.size(), 0);
    opened_.assign(team_.size(), false);
    // Everything from here on is undone by release() if a later step throws.
    struct Cleanup {
      CudaIpcProvider* self;
      bool armed = true;
      ~Cleanup() { if (armed) self->release(); }
    } cleanup{this};

    Published mine{};
    std::string local_error = create_local_heap(mine);
    agree_or_throw(team_, "cuda-ipc", "creating its GPU heap", local_error);

    std::vector<Published> everyone(team_.size());
    team_.allgather(&mine, everyone.data(), sizeof mine);
    for (int r = 0; r < team_.size() && local_error.empty(); ++r) {
      if (r == me || !team_.same_node(r) || everyone[r].has_handle == 0) continue;  // not direct
      local_error = open_peer(r, everyone[r]);
    }
    agree_or_throw(team_, "cuda-ipc", "mapping its peers' GPU heaps", local_error);

    // The largest alignment every rank can honour: the alignment of the least aligned base in
    // any rank's table, so every rank accepts and refuses the same requests.
    std::uint64_t alignment = kMaxAlignmentCap;
    for (auto base : bases_)
      if (base != 0) alignment = std::min<std::uint64_t>(alignment, lowest_set_bit(static_cast<std::uint64_t>(base)));
    std::vector<std::uint64_t> alignments(team_.size());
    team_.allgather(&alignment, alignments.data(), sizeof alignment);
    max_alignment_ = kMaxAlignmentCap;
    for (auto a : alignments) max_alignment_ = std::min<std::size_t>(max_alignment_, a);
    // Ranks on other nodes reach this heap through the message engine (MPI messages to this
    // rank's service thread, which copies through pinned staging), when MPI started the job.
    engine_ = EngineAttachment(open_engine_over_device_memory(team_, heap_base_, heap_bytes_, device_));
    cleanup.armed = false;
  }

  std::size_t max_alignment() const override { return max_alignment_; }
  std::size_t mapped_bytes() const override { return heap_bytes_; }

  // Picks the GPU, makes, zeroes and exports the heap. Returns "" or what failed.
  std::string create_local_heap(Published& mine) {
    int count = 0;
    if (auto why = choose_own_gpu(team_, "cuda-ipc", GpuSharing::allowed, device_, &count); !why.empty()) return why;
    for (int d = 0; d < count; ++d) {
      cudaDeviceProp prop{};
      if (auto why = APERTURE_CUDA_TRY(cudaGetDeviceProperties(&prop, d)); !why.empty()) return why;
      std::array<char, 16> uuid{};
      static_assert(sizeof prop.uuid.bytes == sizeof uuid);
      std::memcpy(uuid.data(), prop.uuid.bytes, sizeof uuid);
      uuids_.push_back(uuid);
    }
    if (auto why = APERTURE_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); !why.empty())
      return why;
    void* heap = nullptr;
    if (auto why = APERTURE_CUDA_TRY(cudaMalloc(&heap, heap_bytes_)); !why.empty())
      return detail::format("{} (the {}-byte GPU heap on device {}); lower APERTURE_GPU_HEAP_SIZE", why, heap_bytes_,
                            device_);
    heap_base_ = heap;
    bases_[team_.rank()] = reinterpret_cast<std::int64_t>(heap);
    // Zeroed like the shm heap's fresh pages, so flags start at 0; done before any peer looks.
    if (auto why = APERTURE_CUDA_TRY(cudaMemsetAsync(heap, 0, heap_bytes_, stream_)); !why.empty()) return why;
    if (auto why = APERTURE_CUDA_TRY(cudaStreamSynchronize(stream_)); !why.empty()) return why;
    std::memcpy(mine.uuid, uuids_[device_].data(), sizeof mine.uuid);
    mine.device = device_;
    if (team_.local_size() > 1) {  // only same-machine peers ever open it
      if (auto why = APERTURE_CUDA_TRY(cudaIpcGetMemHandle(&mine.handle, heap)); !why.empty())
        return why + "; CUDA IPC is not available here (MIG, or a driver without IPC); run one rank";
      mine.has_handle = 1;
    }
    return {};
  }

  // Maps rank r's heap into this process when this GPU can reach r's. Returns "" or what failed;
  // an unreachable GPU is not a failure: its entry stays 0 (not direct).
  std::string open_peer(int r, const Published& peer) {
    int peer_device = -1;  // the peer's GPU as this process numbers it
    for (int d = 0; d < static_cast<int>(uuids_.size()); ++d)
      if (std::memcmp(uuids_[d].data(), peer.uuid, sizeof peer.uuid) == 0) peer_device = d;
    if (peer_device < 0) return {};  // not visible here (CUDA_VISIBLE_DEVICES): not direct
    const bool same_device = peer_device == device_;
    if (!same_device) {
      int can_access = 0;
      if (auto why = APERTURE_CUDA_TRY(cudaDeviceCanAccessPeer(&can_access, device_, peer_device)); !why.empty())
        return why;
      if (can_access == 0) return {};  // no P2P between these GPUs: not direct
    }
    void* mapped = nullptr;
    cudaIpcMemHandle_t handle = peer.handle;
    if (auto why = APERTURE_CUDA_TRY(cudaIpcOpenMemHandle(&mapped, handle, cudaIpcMemLazyEnablePeerAccess));
        !why.empty()) {
      if (same_device)
        return detail::format("{} for rank {}'s heap, which lives on this rank's own GPU {} (more ranks than "
                              "GPUs); give each rank its own GPU",
                              why, r, device_);
      return detail::format("{} for rank {}'s heap on GPU {} (this rank: GPU {})", why, r, peer_device, device_);
    }
    bases_[r] = reinterpret_cast<std::int64_t>(mapped);
    opened_[r] = true;
    return {};
  }

  // The map of a table, on the host and copied into device memory for the kernels.
  SymmetricAddressMap place_table(std::vector<std::int64_t> table, std::size_t bytes) const override {
    CurrentDevice current(device_, "cuda-ipc");
    const std::size_t table_bytes = table.size() * sizeof(std::int64_t);
    void* device_table = nullptr;
    APERTURE_CUDA_CHECK(cudaMalloc(&device_table, table_bytes), "cuda-ipc device table");
    // The last copy of the map frees it.
    std::shared_ptr<const void> owner = foreign_gpu::device_table_owner(device_, device_table);
    APERTURE_CUDA_CHECK(cudaMemcpyAsync(device_table, table.data(), table_bytes, cudaMemcpyHostToDevice, stream_),
                        "cuda-ipc device table");
    // Our own stream, waited for: the table is in place before any stream of the caller's runs.
    APERTURE_CUDA_CHECK(cudaStreamSynchronize(stream_), "cuda-ipc device table");
    return SymmetricAddressMap::from_table(
        "cuda-ipc", team_.rank(), std::move(table), bytes,
        TablePlacement{static_cast<const std::int64_t*>(device_table), std::move(owner)});
  }

  // Undoes whatever the constructor got done. Never throws; errors are ignored because there is
  // nothing left to do about them (and at exit the CUDA runtime may already be gone).
  void release() {
    engine_.release();  // before the memory it covers goes
    if (device_ < 0) return;
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    if (previous != device_) (void)cudaSetDevice(device_);
    (void)cudaDeviceSynchronize();  // no kernel of ours may still be using a peer's mapping
    for (std::size_t r = 0; r < bases_.size(); ++r)
      if (opened_[r]) (void)cudaIpcCloseMemHandle(reinterpret_cast<void*>(bases_[r]));
    if (heap_base_ != nullptr) (void)cudaFree(heap_base_);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    (void)cudaGetLastError();
    heap_base_ = nullptr;
    stream_ = nullptr;
    bases_.clear();
    opened_.clear();
    if (previous >= 0 && previous != device_) (void)cudaSetDevice(previous);
    device_ = -1;
  }

  std::size_t heap_bytes_;
  int device_ = -1;                           // this rank's GPU, as this process numbers it
  void* heap_base_ = nullptr;                 // our cudaMalloc
  cudaStream_t stream_ = nullptr;             // for table copies
  std::size_t max_alignment_ = kMaxAlignmentCap;
  std::vector<std::array<char, 16>> uuids_;         // UUID of each GPU this process sees
  std::vector<bool> opened_;                  // bases_[r] came from cudaIpcOpenMemHandle
};

}  // namespace

ProviderEntry cuda_ipc_entry() {
  ProviderEntry entry;
  entry.name = "cuda-ipc";
  entry.status = [] {
    ProviderStatus status{"cuda-ipc", true, false, {}};
    std::string why;
    const int count = gpus_for_status("cuda-ipc", GpuSharing::allowed, why);
    if (count == 0) {
      status.reason = why;
      return status;
    }
    cudaDeviceProp prop{};
    const std::string first =
        cudaGetDeviceProperties(&prop, 0) == cudaSuccess ? std::string(prop.name) : std::string("unknown GPU");
    (void)cudaGetLastError();
    status.available = true;
    status.reason = detail::format("GPU memory (cudaMalloc + CUDA IPC), {} GPU(s) here ({}{}), ranks of one "
                                   "machine; each rank uses GPU local_rank % {}",
                                   count, first, count > 1 ? ", ..." : "", count);
    return status;
  };
  entry.make = [](Team& team) -> std::unique_ptr<Provider> { return std::make_unique<CudaIpcProvider>(team); };
  return entry;
}

}  // namespace aperture::detail
