// The "cuda-vmm" provider: aperture's own symmetric heap in GPU memory, through the CUDA
// driver's virtual memory management, and able to grow.
//
// Each rank takes one GPU (local_rank % device count) and reserves ONE range of virtual
// addresses (cuMemAddressReserve) with a slot of `capacity` bytes for every rank of this
// machine: the slot of the k-th rank of the machine, in rank order, starts at base + k *
// capacity (on one machine: rank r at base + r * capacity). Its own heap is physical memory
// made with cuMemCreate and mapped into its own slot; the chunks of every same-machine peer come
// in as POSIX file descriptors (cuMemExportToShareableHandle), passed over Unix sockets with
// SCM_RIGHTS (bootstrap/fd_passing.h: an abstract socket per rank, its name and a random token
// published through Team::allgather, the sender's uid checked with SO_PEERCRED), imported with
// cuMemImportFromShareableHandle and mapped into that peer's slot at the same offsets.
// cuMemSetAccess grants this rank's GPU access to every range it maps. A peer on another
// machine, or whose GPU this one cannot reach (no P2P, not visible to this process), has table
// entry 0: not direct. Allocation offsets are identical on every rank (SymmetricHeap is
// deterministic), so one context-wide table serves every allocation: the heap is linear.
//
// Growth. The heap starts with APERTURE_GPU_HEAP_SIZE bytes (default 256 MiB) mapped in a slot of
// APERTURE_VMM_RESERVE bytes (default 64 GiB of virtual space per rank: address space, not
// memory). When an allocation does not fit in the mapped part, allocate() grows the heap first,
// collectively: every rank makes a new cuMemCreate chunk (at least APERTURE_GPU_HEAP_SIZE more),
// maps it right after its mapped part, and the chunks are exchanged and mapped at the same
// offsets of every peer's slot. The slots never move, so the table never changes: every map,
// table and pointer handed out before a grow stays valid, and a kernel may keep running on the
// old part while the heap grows. Only mapped space is ever handed out. The heap does not shrink:
// free() returns space to the heap, not memory to the GPU, until the provider goes.
//
// Each SymmetricAddressMap carries its table in device memory (a small cudaMalloc freed with the
// last copy of the map) and in host memory, as cuda-ipc's do.
//
// Driver calls go through cu_check.h (entry points looked up through the runtime, so the
// library does not link libcuda); their failures name the call, the CUresult and file:line.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "aperture/detail/host_wait.h"
#include "aperture/error.h"
#include "aperture/provider.h"
#include "aperture/team.h"
#include "bootstrap/fd_passing.h"
#include "common/cuda_check.h"
#include "common/env.h"
#include "common/format.h"
#include "engines/engine_attachment.h"
#include "providers/cuda/cu_check.h"
#include "providers/cuda/current_device.h"
#include "providers/cuda/foreign_gpu.h"
#include "providers/cuda/gpu_selection.h"
#include "providers/own_heap/linear_heap_provider.h"
#include "providers/provider_common.h"
#include "providers/registry.h"

namespace aperture::detail {

namespace {

constexpr const char* kWho = "cuda-vmm";

std::size_t round_up(std::size_t value, std::size_t to) { return (value + to - 1) / to * to; }

// What each rank tells the others at start-up.
struct Published {
  FdMailbox::Address mailbox;  // meaningful when has_mailbox
  char uuid[16];               // the GPU's UUID: ordinals differ between processes, UUIDs do not
  std::uint64_t granularity;   // cuMemGetAllocationGranularity (minimum) of its GPU
  std::int32_t has_mailbox;
  std::int32_t device;         // ordinal in the publisher's process, for messages
};
static_assert(std::is_trivially_copyable_v<Published>, "Published crosses processes as bytes");

// One physical chunk in the reservation: one of ours, or a peer's imported one.
struct Chunk {
  CUdeviceptr va = 0;
  std::size_t bytes = 0;
  CUmemGenericAllocationHandle handle = 0;
  bool mapped = false;
};

CUmemAllocationProp chunk_properties(int device, bool exportable) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  return prop;
}

// "" when `device` can make exportable VMM memory; the reason otherwise.
std::string vmm_support(int device, bool need_export) {
  const DriverApi& api = driver_api_or_not();
  if (!api.loaded) return api.why_not;
  const auto& cu = api;
  CUdevice handle = 0;
  if (auto why = APERTURE_CU_TRY(cu.cuDeviceGet(&handle, device)); !why.empty()) return why;
  int vmm = 0, fd = 0;
  if (auto why = APERTURE_CU_TRY(
          cu.cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, handle));
      !why.empty())
    return why;
  if (vmm == 0)
    return detail::format("GPU {} does not support CUDA virtual memory management "
                          "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0); use cuda-ipc",
                          device);
  if (!need_export) return {};
  if (auto why = APERTURE_CU_TRY(
          cu.cuDeviceGetAttribute(&fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, handle));
      !why.empty())
    return why;
  if (fd == 0)
    return detail::format("GPU {} cannot export memory as a POSIX file descriptor "
                          "(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED is 0), which sharing "
                          "it between the ranks of a machine needs; use cuda-ipc or run one rank per machine",
                          device);
  return {};
}

class CudaVmmProvider final : public LinearHeapProvider {
 public:
  explicit CudaVmmProvider(Team& team)
      : LinearHeapProvider(team, HeapNames{kWho, "GPU heap", "APERTURE_VMM_RESERVE"}, 0),
        grow_step_(env::gpu_heap_size(env::kCudaVmmHeapDefault)),
        capacity_(env::vmm_reserve()) {
    team_.check_same("cuda-vmm provider start", {{"heap_bytes", grow_step_}, {"reserve_bytes", capacity_}});
    const int me = team_.rank();
    const int n = team_.size();
    bases_.assign(n, 0);
    // Everything from here on is undone by release() if a later step throws.
    struct Cleanup {
      CudaVmmProvider* self;
      bool armed = true;
      ~Cleanup() {
        if (armed) self->release();
      }
    } cleanup{this};

    // 1. This rank's GPU, its support for VMM, its granularity, and the mailbox for the fds.
    slot_of_.assign(n, -1);
    int slots = 0;
    for (int r = 0; r < n; ++r)
      if (r == me || team_.same_node(r)) slot_of_[r] = slots++;
    sharing_ = slots > 1;
    Published mine{};
    std::string local_error = prepare_device(mine);
    foreign_gpu::agree_or_throw(team_, kWho, "preparing its GPU", local_error);

    // 2. Sizes every rank agrees on: the coarsest granularity of any rank's GPU.
    std::vector<Published> everyone(n);
    team_.allgather(&mine, everyone.data(), sizeof mine);
    granularity_ = 0;
    for (const auto& p : everyone) granularity_ = std::max<std::size_t>(granularity_, p.granularity);
    if (granularity_ == 0 || (granularity_ & (granularity_ - 1)) != 0)
      throw Error(ErrorCode::internal,
                  detail::format("cuda-vmm: the GPUs report an allocation granularity of {} bytes, not a power of two",
                                 granularity_));
    capacity_ = round_up(capacity_, granularity_);
    grow_step_ = round_up(grow_step_, granularity_);
    if (grow_step_ > capacity_)
      throw Error(
          ErrorCode::invalid_argument,
          detail::format("cuda-vmm: APERTURE_GPU_HEAP_SIZE ({} bytes) is larger than the virtual space reserved "
                         "for each rank's heap, APERTURE_VMM_RESERVE ({} bytes); raise APERTURE_VMM_RESERVE or "
                         "lower APERTURE_GPU_HEAP_SIZE",
                         grow_step_, capacity_));
    heap_ = SymmetricHeap(capacity_);

    // 3. The one reservation, and which peers this GPU reaches.
    local_error = reserve(static_cast<std::size_t>(slots));
    if (local_error.empty()) {
      for (int r = 0; r < n; ++r) {
        if (slot_of_[r] < 0) continue;  // another machine: not direct
        const bool reachable = r == me || reaches(everyone[r]);
        if (reachable) bases_[r] = static_cast<std::int64_t>(reservation_ + slot_of_[r] * capacity_);
        if (r != me && sharing_) mailboxes_.emplace(r, everyone[r].mailbox);
      }
    }
    foreign_gpu::agree_or_throw(team_, kWho, "reserving its virtual address range", local_error);

    // 4. The initial heap: a grow from nothing.
    grow_to(grow_step_, "mapping the initial heap");
    // Ranks on other nodes reach this rank's slot through the message engine (MPI messages to
    // its service thread, which copies through pinned staging), when MPI started the job. It
    // covers the whole slot; a request beyond what is mapped fails in the copy, with the reason.
    engine_ = EngineAttachment(
        open_engine_over_device_memory(team_, reinterpret_cast<void*>(bases_[me]), capacity_, device_));
    cleanup.armed = false;
  }

  ~CudaVmmProvider() override { release(); }

  MemoryKind memory_kind() const override { return MemoryKind::device; }

 private:
  // The allocation granularity: every chunk, and so every slot, starts at a multiple of it.
  std::size_t max_alignment() const override { return granularity_; }
  std::size_t mapped_bytes() const override { return mapped_; }

  // Every rank's heap took the same block, so every rank makes the same decision here; a grow
  // that fails throws on every rank, and the block is given back.
  void make_room(std::size_t offset, std::size_t bytes) override {
    const std::size_t end = offset + std::max<std::size_t>(bytes, 1);
    if (end <= mapped_) return;
    const std::size_t target = std::min(capacity_, std::max(round_up(end, granularity_), mapped_ + grow_step_));
    grow_to(target, "growing the heap");
  }

  // Picks the GPU, checks it supports what we need, learns its granularity and opens the
  // mailbox. Returns "" or what failed.
  std::string prepare_device(Published& mine) {
    const DriverApi& api = driver_api_or_not();
    if (!api.loaded) return api.why_not;
    int count = 0;
    if (auto why = choose_own_gpu(team_, kWho, GpuSharing::allowed, device_, &count); !why.empty()) return why;
    for (int d = 0; d < count; ++d) {
      cudaDeviceProp prop{};
      if (auto why = APERTURE_CUDA_TRY(cudaGetDeviceProperties(&prop, d)); !why.empty()) return why;
      std::array<char, 16> uuid{};
      static_assert(sizeof prop.uuid.bytes == sizeof uuid);
      std::memcpy(uuid.data(), prop.uuid.bytes, sizeof uuid);
      uuids_.push_back(uuid);
    }
    if (auto why = vmm_support(device_, sharing_); !why.empty()) return why;
    const auto& cu = api;
    const CUmemAllocationProp prop = chunk_properties(device_, sharing_);
    std::size_t granularity = 0;
    if (auto why = APERTURE_CU_TRY(
            cu.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        !why.empty())
      return why;
    if (auto why = APERTURE_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); !why.empty())
      return why;
    if (sharing_) {
      try {
        mailbox_.emplace();
      } catch (const Error& e) {
        return std::string("opening the socket the peers pass their memory through: ") + e.what();
      }
      mine.mailbox = mailbox_->address();
      mine.has_mailbox = 1;
    }
    std::memcpy(mine.uuid, uuids_[device_].data(), sizeof mine.uuid);
    mine.granularity = granularity;
    mine.device = device_;
    return {};
  }

  // Whether this GPU can reach the memory of the GPU `peer` published.
  bool reaches(const Published& peer) const {
    int peer_device = -1;  // the peer's GPU as this process numbers it
    for (int d = 0; d < static_cast<int>(uuids_.size()); ++d)
      if (std::memcmp(uuids_[d].data(), peer.uuid, sizeof peer.uuid) == 0) peer_device = d;
    if (peer_device < 0) return false;       // not visible here (CUDA_VISIBLE_DEVICES): not direct
    if (peer_device == device_) return true;  // two ranks on one GPU
    int can_access = 0;
    if (cudaDeviceCanAccessPeer(&can_access, device_, peer_device) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return can_access != 0;
  }

  std::string reserve(std::size_t slots) {
    const auto& cu = driver_api(kWho);
    const std::size_t bytes = slots * capacity_;
    CUdeviceptr base = 0;
    if (auto why = APERTURE_CU_TRY(cu.cuMemAddressReserve(&base, bytes, granularity_, 0, 0)); !why.empty())
      return detail::format("{} (the {}-byte virtual range for {} heap(s) of {} bytes); lower APERTURE_VMM_RESERVE",
                            why, bytes, slots, capacity_);
    reservation_ = base;
    reservation_bytes_ = bytes;
    return {};
  }

  // Collective: maps [mapped_, target) of every direct rank's slot, with a fresh chunk of this
  // rank's memory and the peers' fresh chunks. On failure every rank throws and every rank's
  // heap is as it was before.
  void grow_to(std::size_t target, const char* step) {
    team_.check_same("cuda-vmm grow", {{"from", mapped_}, {"to", target}});
    if (target <= mapped_) return;
    CurrentDevice current(device_, kWho, SetDevice::always);  // driver calls follow
    const auto& cu = driver_api(kWho);
    const int me = team_.rank();
    const std::size_t offset = mapped_;
    const std::size_t bytes = target - mapped_;
    const std::uint64_t round = ++grow_rounds_;

    // Whatever this grow mapped is undone unless every rank succeeded.
    struct Rollback {
      CudaVmmProvider* self;
      std::vector<Chunk> chunks;
      bool armed = true;
      ~Rollback() {
        if (armed) self->unmap_and_release(chunks);
      }
    } added{this, {}};

    // 1. Our chunk: made, mapped, opened to our GPU, zeroed (like shm's fresh pages, so flags
    // start at 0) and exported, before any peer can look at it.
    Fd exported;
    std::string error;
    ErrorCode code = ErrorCode::system;  // out_of_memory when the GPU has no room for the chunk
    {
      const CUmemAllocationProp prop = chunk_properties(device_, sharing_);
      Chunk chunk;
      chunk.va = static_cast<CUdeviceptr>(own_base() + offset);
      chunk.bytes = bytes;
      const CUresult created = cu.cuMemCreate(&chunk.handle, bytes, &prop, 0);
      error = cu_failure(created, "cuMemCreate(&handle, bytes, &prop, 0)", __FILE__, __LINE__);
      if (!error.empty()) {
        code = cu_error_code(created);
        error = detail::format("{} (a {}-byte chunk, the heap going from {} to {} bytes on GPU {}); free memory on the "
                               "GPU, or lower APERTURE_GPU_HEAP_SIZE or what is allocated",
                               error, bytes, mapped_, target, device_);
      } else {
        added.chunks.push_back(chunk);
        error = map_chunk(added.chunks.back());
      }
      if (error.empty())
        error = APERTURE_CUDA_TRY(cudaMemsetAsync(reinterpret_cast<void*>(chunk.va), 0, bytes, stream_));
      if (error.empty()) error = APERTURE_CUDA_TRY(cudaStreamSynchronize(stream_));
      if (error.empty() && sharing_) {
        int fd = -1;
        error = APERTURE_CU_TRY(
            cu.cuMemExportToShareableHandle(&fd, chunk.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        exported = Fd(fd);
      }
    }
    // Every rank reads the refusal of the rank whose GPU is full (out_of_memory), not only "rank R failed".
    agree_or_refuse(team_, kWho, step, error, code);

    if (sharing_) {
      // 2. Our chunk to every peer of this machine (a send never waits for its receiver).
      const auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(timeout_seconds()));
      const std::uint64_t tag = (round << 32) | static_cast<std::uint32_t>(me);
      for (const auto& [r, address] : mailboxes_) {
        error = FdMailbox::send(address, tag, exported.get(), deadline);
        if (!error.empty()) {
          error = detail::format("passing its new chunk to rank {}: {}", r, error);
          break;
        }
      }
      foreign_gpu::agree_or_throw(team_, kWho, step, error);

      // 3. Every peer's chunk: received, and mapped into its slot where this GPU reaches it.
      // Leftovers of an earlier grow that failed (another round) are dropped.
      std::vector<bool> received(team_.size(), false);
      std::size_t pending = mailboxes_.size();
      while (pending > 0 && error.empty()) {
        FdMailbox::Message message;
        try {
          message = mailbox_->receive(deadline);
        } catch (const Error& e) {
          error = e.what();
          break;
        }
        const std::uint64_t from_round = message.tag >> 32;
        const auto from = static_cast<int>(message.tag & 0xffffffffu);
        if (from_round != round) continue;  // a stale chunk: closed with `message`
        if (from < 0 || from >= team_.size() || !mailboxes_.count(from) || received[from]) {
          error = detail::format("a chunk arrived tagged as rank {}'s, which is not a peer on this machine or sent "
                                 "twice",
                                 from);
          break;
        }
        received[from] = true;
        --pending;
        if (bases_[from] == 0) continue;  // this GPU cannot reach it: not direct
        Chunk chunk;
        chunk.va = static_cast<CUdeviceptr>(bases_[from]) + offset;
        chunk.bytes = bytes;
        error = APERTURE_CU_TRY(cu.cuMemImportFromShareableHandle(
            &chunk.handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(message.fd.get())),
            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        if (!error.empty()) {
          error = detail::format("importing rank {}'s chunk: {}", from, error);
          break;
        }
        added.chunks.push_back(chunk);
        error = map_chunk(added.chunks.back());
        if (!error.empty()) error = detail::format("mapping rank {}'s chunk: {}", from, error);
      }
      foreign_gpu::agree_or_throw(team_, kWho, step, error);
    }

    for (auto& chunk : added.chunks) chunks_.push_back(chunk);
    added.armed = false;
    mapped_ = target;
  }

  // Maps a chunk at its address and opens it to this rank's GPU. Returns "" or what failed.
  std::string map_chunk(Chunk& chunk) {
    const auto& cu = driver_api(kWho);
    if (auto why = APERTURE_CU_TRY(cu.cuMemMap(chunk.va, chunk.bytes, 0, chunk.handle, 0)); !why.empty()) return why;
    chunk.mapped = true;
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device_;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return APERTURE_CU_TRY(cu.cuMemSetAccess(chunk.va, chunk.bytes, &access, 1));
  }

  // Unmaps and releases chunks, last first. Never throws; errors are ignored (at exit the
  // driver may already be gone).
  void unmap_and_release(std::vector<Chunk>& chunks) {
    const DriverApi& cu = driver_api_or_not();
    if (!cu.loaded) return;
    for (auto it = chunks.rbegin(); it != chunks.rend(); ++it) {
      if (it->mapped) (void)cu.cuMemUnmap(it->va, it->bytes);
      if (it->handle != 0) (void)cu.cuMemRelease(it->handle);
    }
    chunks.clear();
  }

  // The map of a table, on the host and copied into device memory for the kernels.
  SymmetricAddressMap place_table(std::vector<std::int64_t> table, std::size_t bytes) const override {
    TablePlacement placement = foreign_gpu::place_table_on_device(device_, table, "cuda-vmm device table");
    return SymmetricAddressMap::from_table(kWho, team_.rank(), std::move(table), bytes, std::move(placement));
  }

  // Undoes whatever the constructor got done. Never throws.
  void release() {
    engine_.release();  // before the memory it covers goes
    if (device_ < 0) return;
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    (void)cudaSetDevice(device_);
    (void)cudaDeviceSynchronize();  // no kernel of ours may still be using a mapping
    unmap_and_release(chunks_);
    const DriverApi& cu = driver_api_or_not();
    if (reservation_ != 0 && cu.loaded) (void)cu.cuMemAddressFree(reservation_, reservation_bytes_);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    (void)cudaGetLastError();
    reservation_ = 0;
    stream_ = nullptr;
    mailbox_.reset();  // closes the socket
    mailboxes_.clear();
    bases_.clear();
    mapped_ = 0;
    if (previous >= 0 && previous != device_) (void)cudaSetDevice(previous);
    device_ = -1;
  }

  std::size_t grow_step_;  // APERTURE_GPU_HEAP_SIZE: the initial heap and the least a grow adds
  std::size_t capacity_;   // APERTURE_VMM_RESERVE: each rank's slot of virtual space
  std::size_t granularity_ = 0;
  std::size_t mapped_ = 0;  // bytes of every slot backed by memory
  std::uint64_t grow_rounds_ = 0;
  int device_ = -1;          // this rank's GPU, as this process numbers it
  bool sharing_ = false;     // other ranks on this machine: chunks are exported and exchanged
  cudaStream_t stream_ = nullptr;
  CUdeviceptr reservation_ = 0;
  std::size_t reservation_bytes_ = 0;
  std::vector<int> slot_of_;                    // rank -> its slot in the reservation; -1: another machine
  std::vector<std::array<char, 16>> uuids_;     // UUID of each GPU this process sees
  std::vector<Chunk> chunks_;                   // everything mapped, ours and the peers'
  std::optional<FdMailbox> mailbox_;            // where the peers' chunks arrive
  std::map<int, FdMailbox::Address> mailboxes_;  // same-machine peer -> its mailbox
};

}  // namespace

ProviderEntry cuda_vmm_entry() {
  ProviderEntry entry;
  entry.name = kWho;
  entry.status = [] {
    ProviderStatus status{kWho, true, false, {}};
    std::string why;
    const int count = gpus_for_status(kWho, GpuSharing::allowed, why);
    if (count == 0) {
      status.reason = why;
      return status;
    }
    // Every GPU a rank may take must do it; exporting is needed once a machine runs two ranks.
    for (int d = 0; d < count; ++d) {
      if (auto reason = vmm_support(d, true); !reason.empty()) {
        status.reason = reason;
        return status;
      }
    }
    status.available = true;
    status.reason = detail::format("GPU memory (cuMemCreate, shared as POSIX fds over Unix sockets, one reserved range, "
                                   "grows on demand), {} GPU(s) here, ranks of one machine; each rank uses GPU "
                                   "local_rank % {}",
                                   count, count);
    return status;
  };
  entry.make = [](Team& team) -> std::unique_ptr<Provider> { return std::make_unique<CudaVmmProvider>(team); };
  return entry;
}

}  // namespace aperture::detail
