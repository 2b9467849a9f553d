// The "nccl" provider: GPU memory owned by NCCL, a foreign allocator with per-allocation tables.
//
// Each allocation is ncclMemAlloc'd and registered as a symmetric window
// (ncclCommWindowRegister(..., NCCL_WIN_COLL_SYMMETRIC)). NCCL maps every load/store-accessible
// (LSA) peer's copy of a window into this process, but says where only on the device: a
// one-block kernel (nccl_peer_table.cu) asks ncclGetPeerPointer for each peer through NCCL
// 2.28's device API and writes the table straight into device memory. Entry [me] is the pointer
// ncclMemAlloc returned (NCCL's own mapping of it is another address of the same memory). A peer
// outside the LSA team has entry 0 and is not direct: NCCL would still compute an address for
// it, so membership is checked, never inferred from the pointer.
//
// The communicator holds the ranks of this node only (nccl_node_ranks.h; all of the team on one
// node): NCCL 2.28's ncclDevCommCreate over ranks on several hosts refuses without GPU-initiated
// networking (GIN), which its socket transport lacks, even when no GIN resources are asked for.
// Windows are registered on it, so its device communicator fills the table entries of this
// node's ranks (mapped from communicator ranks back to team ranks); no NCCL traffic crosses
// nodes at all.
//
// Ranks on other nodes (entry 0) reach a window through the message engine, opened over each
// allocation as mpi-window opens one per window (src/engines/engine.h: MPI messages to the
// target's service thread, which copies through pinned host staging), when mpirun started a job
// that spans nodes; the allocation's LiveAllocations entry holds it and closes it before the
// window is deregistered. NCCL's own transports are not used for it: NCCL 2.28 offers no
// host-initiated one-sided call for a peer outside the LSA team.
//
// Windows are placed wherever NCCL puts them, so nothing ties one allocation's peer distances to
// another's: each allocation has its own table and translates only its own memory
// (is_linear() is false).
//
// Start-up: ncclCommInitRank with a unique id made by the node's lowest rank and shared over the
// Team (so `aperture launch`, mpirun and torchrun all work; on one node that is rank 0's id and
// the whole team, as it always was), one GPU per rank (local_rank % device count), then
// ncclDevCommCreate, then one window whose table is proved by storing through it.
// NVLink multicast is off (NCCL_NVLS_ENABLE=0, set before NCCL starts; no multimem is asked
// of the device communicator): aperture never uses it, and on a shared host it can take every
// GPU out of service.
//
// Collective: the constructor, allocate, free and the destructor (which deregisters every window
// still live and destroys the communicator). Over several nodes: gpu.proxy.nccl.nodes2.np2 (two
// ranks sharing one GPU as two nodes; docs/MULTINODE.md says which runs passed).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "aperture/error.h"
#include "aperture/provider.h"
#include "aperture/team.h"
#include "common/cuda_check.h"
#include "common/nccl_check.h"
#include "common/format.h"
#include "engines/engine_attachment.h"
#include "providers/cuda/foreign_gpu.h"
#include "providers/foreign_window/nccl_node_ranks.h"
#include "providers/foreign_window/nccl_peer_table.h"
#include "providers/live_allocations.h"
#include "providers/registry.h"

namespace aperture::detail {

namespace {

using foreign_gpu::agree_or_throw;

constexpr const char* kWho = "nccl";
constexpr int kMinimumVersion = 22800;  // 2.28.0: the device API (ncclDevCommCreate, ncclGetPeerPointer)
// ncclMemAlloc returns memory aligned to the VMM granularity (2 MiB on current GPUs); larger
// alignments are refused rather than hoped for.
constexpr std::size_t kMaxAlignment = std::size_t{2} << 20;

std::string version_text(int code) {
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z since 2.9.
  return format("{}.{}.{}", code / 10000, code / 100 % 100, code % 100);
}

int runtime_version() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return 0;
  return version;
}

std::size_t round_up(std::size_t value, std::size_t to) { return (value + to - 1) / to * to; }

class NcclProvider final : public Provider {
 public:
  explicit NcclProvider(Team& team) : team_(team) {
    team_.check_same("nccl provider start", {});
    // Everything from here on is undone by release() if a later step throws.
    struct Cleanup {
      NcclProvider* self;
      bool armed = true;
      ~Cleanup() {
        if (armed) self->release(/*orderly=*/false);
      }
    } cleanup{this};
    choose_device();
    {
      CurrentDevice current(device_, kWho);
      start_communicator();
      verify_first_window();
    }
    APERTURE_CUDA_CHECK(cudaSetDevice(device_), kWho);  // leave this rank's GPU current
    cleanup.armed = false;
  }

  // Collective, like window deregistration. While an exception unwinds (ranks may be out of
  // step) the communicator is aborted instead, which waits for no one.
  ~NcclProvider() override { release(/*orderly=*/std::uncaught_exceptions() == 0); }

  std::string_view name() const override { return kWho; }
  MemoryKind memory_kind() const override { return MemoryKind::device; }
  bool is_linear() const override { return false; }

  Allocation allocate(std::size_t bytes, std::size_t alignment) override {
    team_.check_same("nccl allocate", {{"bytes", bytes}, {"alignment", alignment}});
    check_allocation_request(kWho, bytes, alignment);
    if (alignment > kMaxAlignment)
      throw Error(ErrorCode::invalid_argument,
                  format("nccl allocate: alignment {} exceeds the largest ncclMemAlloc gives ({} bytes)", alignment,
                         kMaxAlignment));
    CurrentDevice current(device_, kWho);
    Window window = open_window(bytes, alignment);
    // Ranks on other nodes reach the window through the message engine (collective; none opens
    // on one node or where MPI did not start the ranks).
    EngineAttachment engine;
    try {
      engine = EngineAttachment(open_engine_over_device_memory(team_, window.ptr, std::max<std::size_t>(bytes, 1), device_));
    } catch (...) {
      // Every rank decides alike whether an engine opens, so every rank closes its window here.
      (void)close_window(window);
      throw;
    }
    Allocation allocation;
    allocation.ptr = window.ptr;
    allocation.bytes = bytes;
    allocation.map = window.map;
    live_.add(allocation, std::move(window), std::move(engine));
    return allocation;
  }

  void free(Allocation& allocation) override {
    auto entry = live_.take_for_free(team_, kWho, allocation);
    CurrentDevice current(device_, kWho);
    // The engine first (collective), while the window it reaches is still there; a failure to
    // close it still lets every rank reach the deregistration below.
    std::string error;
    try {
      entry.engine.close();
    } catch (const Error& e) {
      error = format("closing the window's engine: {}", e.what());
    }
    const std::string closing = close_window(entry.resource);
    if (error.empty()) error = closing;
    agree_or_throw(team_, kWho, "freeing a window", error);
  }

  SymmetricAddressMap symmetric_address_map(const void* ptr, std::size_t bytes) const override {
    if (auto view = live_.view_of(kWho, ptr, bytes, [&](std::vector<std::int64_t> table) {
          TablePlacement placement = foreign_gpu::place_table_on_device(device_, table, "nccl view table");
          return SymmetricAddressMap::from_table(kWho, team_.rank(), std::move(table), bytes, std::move(placement));
        }))
      return *std::move(view);
    throw Error(ErrorCode::invalid_argument,
                format("nccl symmetric_address_map: [{}, +{} bytes) is not inside a live allocation of this provider "
                       "(freed, or allocated by another provider?); an NCCL window is described through the provider "
                       "that registered it",
                       ptr, bytes));
  }

 private:
  struct Window {
    void* ptr = nullptr;             // from ncclMemAlloc
    ncclWindow_t window = nullptr;   // from ncclCommWindowRegister
    SymmetricAddressMap map;
  };

  void choose_device() {
    std::string why = choose_own_gpu(team_, kWho, GpuSharing::refused, device_);
    if (why.empty()) why = APERTURE_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    agree_or_throw(team_, kWho, "choosing its GPU", why);
  }

  void start_communicator() {
    // Never multicast: set before NCCL reads its environment (at its first call).
    ::setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/1);
    std::string error;
    try {
      node_ranks_ = node_communicator_ranks(team_);
    } catch (const Error& e) {
      error = e.what();
    }
    agree_or_throw(team_, kWho, "choosing its communicator's ranks", error);
    const bool whole_team = team_.node_count() == 1;
    const std::string which = whole_team ? std::string("the team's")
                                         : format("node {}'s ({} of the team's {} ranks)", team_.node(),
                                                  node_ranks_.size(), team_.size());
    ncclUniqueId id{};
    if (team_.rank() == node_ranks_.id_maker()) error = nccl_failure(ncclGetUniqueId(&id), "ncclGetUniqueId(&id)");
    agree_or_throw(team_, kWho, "making NCCL's unique id", error);
    if (whole_team) {
      team_.broadcast(&id, sizeof id, 0);
    } else {
      std::vector<ncclUniqueId> ids(static_cast<std::size_t>(team_.size()));
      team_.allgather(&id, ids.data(), sizeof id);
      id = ids[static_cast<std::size_t>(node_ranks_.id_maker())];
    }

    ncclComm_t comm = nullptr;
    error = nccl_failure(ncclCommInitRank(&comm, node_ranks_.size(), id, node_ranks_.rank),
                         format("ncclCommInitRank(&comm, {} ranks, id, rank {}) for {} communicator",
                                node_ranks_.size(), node_ranks_.rank, which));
    if (error.empty()) comm_ = comm;
    agree_or_throw(team_, kWho, "starting its NCCL communicator", error);

    // Where each communicator rank's entry goes in a team-sized table, for the table kernel.
    error = APERTURE_CUDA_TRY(cudaMalloc(&device_team_rank_of_, node_ranks_.team_rank_of.size() * sizeof(int)));
    if (error.empty())
      error = APERTURE_CUDA_TRY(cudaMemcpy(device_team_rank_of_, node_ranks_.team_rank_of.data(),
                                           node_ranks_.team_rank_of.size() * sizeof(int), cudaMemcpyHostToDevice));
    agree_or_throw(team_, kWho, "placing its communicator's rank map on the GPU", error);

    error = nccl_device::DeviceComm::create(comm_, dev_comm_);
    if (!error.empty()) error += format(" (over {} communicator)", which);
    agree_or_throw(team_, kWho, "creating NCCL's device communicator", error);
    if (dev_comm_->world_rank() != node_ranks_.rank || dev_comm_->world_size() != node_ranks_.size())
      error = format("NCCL's device communicator says rank {} of {}, expected rank {} of {} ({} communicator)",
                     dev_comm_->world_rank(), dev_comm_->world_size(), node_ranks_.rank, node_ranks_.size(), which);
    agree_or_throw(team_, kWho, "creating NCCL's device communicator", error);
  }

  // The first window's table is proved, not assumed: every rank stores through it into every
  // direct peer and checks what arrived in its own copy.
  void verify_first_window() {
    Window probe = open_window(static_cast<std::size_t>(team_.size()) * sizeof(std::uint64_t), 256);
    const std::vector<std::int64_t> table(probe.map.host_peer_bases().begin(), probe.map.host_peer_bases().end());
    std::string error = foreign_gpu::verify_peer_stores(team_, probe.ptr, table);
    if (!error.empty())
      error += format("\n  (this rank is {} of an LSA team of {}; table:", dev_comm_->lsa_rank(), dev_comm_->lsa_size());
    for (std::size_t p = 0; p < table.size() && !error.empty(); ++p)
      error += format(" {:#x}", static_cast<std::uint64_t>(table[p]));
    if (!error.empty()) error += ")";
    const std::string closing = close_window(probe);
    agree_or_throw(team_, kWho, "storing through its first window's table", error.empty() ? closing : error);
  }

  // Collective, before ncclMemAlloc: every rank checks that its GPU has the window's bytes free
  // (cudaMemGetInfo, less a margin for the window's table and NCCL's registration), and every
  // rank refuses together (out_of_memory, with the rank that lacks it) when one does not: a
  // failure inside NCCL's allocation or registration is not one every rank would see alike.
  void refuse_unless_room(std::size_t bytes, std::size_t window_bytes) {
    constexpr std::size_t kMargin = std::size_t{64} << 20;
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    std::string error = APERTURE_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
    ErrorCode code = ErrorCode::system;
    if (error.empty() && (free_bytes < kMargin || window_bytes > free_bytes - kMargin)) {
      std::uint64_t held = 0;
      for (auto* entry : live_.oldest_first()) held += entry->map.allocation_bytes;
      error = format("{} bytes cannot be had: GPU {} has {} bytes of GPU memory free of {} (cudaMemGetInfo; {} kept for "
                     "tables and NCCL's registration), and this provider holds {} bytes in {} windows; refused "
                     "before ncclMemAlloc. NCCL windows take GPU memory directly (there is no heap size to raise): "
                     "free allocations, or memory other users of this GPU hold",
                     bytes, device_, free_bytes, total_bytes, kMargin, held, live_.size());
      code = ErrorCode::out_of_memory;
    }
    agree_or_refuse(team_, kWho, "allocate", error, code);
  }

  // Collective: allocates, zeroes and registers one window and builds its table.
  Window open_window(std::size_t bytes, std::size_t alignment) {
    // Registered windows are whole 4 KiB pages, the same size on every rank.
    const std::size_t window_bytes = round_up(std::max<std::size_t>(bytes, 1), NCCL_WIN_REQUIRED_ALIGNMENT);
    refuse_unless_room(bytes, window_bytes);
    Window w;
    std::string error = nccl_failure(ncclMemAlloc(&w.ptr, window_bytes), format("ncclMemAlloc(&ptr, {})", window_bytes),
                                     comm_);
    if (!error.empty()) error += "; free allocations (the GPU may be out of memory)";
    if (error.empty() && reinterpret_cast<std::uintptr_t>(w.ptr) % alignment != 0)
      error = format("ncclMemAlloc returned {}, which is not aligned to {}", w.ptr, alignment);
    // Zeroed like the other providers' fresh memory, so flags start at 0; done before any peer
    // can reach it (registration below is collective).
    if (error.empty()) error = APERTURE_CUDA_TRY(cudaMemsetAsync(w.ptr, 0, window_bytes, stream_));
    if (error.empty()) error = APERTURE_CUDA_TRY(cudaStreamSynchronize(stream_));
    if (!error.empty() && w.ptr != nullptr) {
      (void)ncclMemFree(w.ptr);
      w.ptr = nullptr;
    }
    agree_or_throw(team_, kWho, "allocating", error);

    error = nccl_failure(ncclCommWindowRegister(comm_, w.ptr, window_bytes, &w.window, NCCL_WIN_COLL_SYMMETRIC),
                         format("ncclCommWindowRegister(comm, ptr, {}, &window, NCCL_WIN_COLL_SYMMETRIC)", window_bytes),
                         comm_);
    if (error.empty() && w.window == nullptr)
      error = "ncclCommWindowRegister gave no window: this communicator does not support symmetric memory (it needs "
              "CUDA VMM, NCCL_CUMEM_ENABLE not 0, and P2P between the GPUs)";
    if (!error.empty()) (void)ncclMemFree(w.ptr);
    agree_or_throw(team_, kWho, "registering a window", error);

    // The table, written by the kernel straight into device memory; the host copy is read back.
    const std::size_t entries = static_cast<std::size_t>(team_.size()) + 1;  // + NCCL's own local mapping
    void* device_table = nullptr;
    error = APERTURE_CUDA_TRY(cudaMalloc(&device_table, entries * sizeof(std::int64_t)));
    std::vector<std::int64_t> table(entries, 0);
    if (error.empty())
      error = dev_comm_->fill_peer_table(w.window, w.ptr, device_team_rank_of_, team_.size(),
                                         static_cast<std::int64_t*>(device_table), stream_);
    if (error.empty())
      error = APERTURE_CUDA_TRY(
          cudaMemcpy(table.data(), device_table, entries * sizeof(std::int64_t), cudaMemcpyDeviceToHost));
    if (error.empty() && table[team_.size()] == 0) error = "ncclGetLocalPointer gave NULL for a registered window";
    if (error.empty() && table[team_.rank()] != reinterpret_cast<std::int64_t>(w.ptr))
      error = format("this rank's entry is {:#x}, not the window's base {}",
                     static_cast<std::uint64_t>(table[team_.rank()]), w.ptr);
    for (int p = 0; p < team_.size() && error.empty(); ++p)
      if (!team_.same_node(p) && table[p] != 0)
        error = format("the entry of rank {} (node {}, outside this node's communicator) is {:#x}, not 0", p,
                       team_.node_of(p), static_cast<std::uint64_t>(table[p]));
    if (!error.empty()) {
      if (device_table != nullptr) (void)cudaFree(device_table);
      error = "building the window's peer table: " + error;
      const std::string closing = close_window(w);
      if (!closing.empty()) error += "; then " + closing;
    }
    agree_or_throw(team_, kWho, "building a window's table", error);

    table.resize(team_.size());
    std::shared_ptr<const void> owner = foreign_gpu::device_table_owner(device_, device_table);
    w.map = SymmetricAddressMap::from_table(
        kWho, team_.rank(), std::move(table), bytes,
        TablePlacement{static_cast<const std::int64_t*>(device_table), std::move(owner)});
    return w;
  }

  // Collective (window deregistration). Returns "" or what failed; the memory is freed anyway.
  // A map of the window may outlive it: its table stays readable, the memory does not.
  std::string close_window(Window& w) {
    std::string error;
    if (w.window != nullptr) {
      // No kernel of ours may still be using the window when NCCL unmaps it.
      error = APERTURE_CUDA_TRY(cudaDeviceSynchronize());
      const std::string deregister =
          nccl_failure(ncclCommWindowDeregister(comm_, w.window), "ncclCommWindowDeregister(comm, window)", comm_);
      if (error.empty()) error = deregister;
      w.window = nullptr;
    }
    if (w.ptr != nullptr) {
      const std::string freed = nccl_failure(ncclMemFree(w.ptr), "ncclMemFree(ptr)", comm_);
      if (error.empty()) error = freed;
      w.ptr = nullptr;
    }
    return error;
  }

  // Undoes whatever the constructor got done. Never throws. `orderly`: every rank is here
  // together, so windows are deregistered and the communicator finalized; otherwise the
  // communicator is aborted (that waits for no one) and only local memory is released.
  void release(bool orderly) {
    if (device_ < 0) return;
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    if (previous != device_) (void)cudaSetDevice(device_);
    (void)cudaDeviceSynchronize();
    if (orderly && comm_ != nullptr) {
      for (auto* entry : live_.oldest_first()) {
        entry->engine.release();  // collective, before the window it reaches goes
        (void)close_window(entry->resource);
      }
      dev_comm_.reset();
      (void)ncclCommFinalize(comm_);
      (void)ncclCommDestroy(comm_);
    } else {
      if (dev_comm_) dev_comm_->forget();  // an aborted communicator takes its device side with it
      dev_comm_.reset();
      if (comm_ != nullptr) (void)ncclCommAbort(comm_);
      for (auto* entry : live_.oldest_first()) {
        entry->engine.abandon();  // the other ranks may never come to a collective close
        if (entry->resource.ptr != nullptr) (void)ncclMemFree(entry->resource.ptr);
      }
    }
    live_.clear();
    comm_ = nullptr;
    if (device_team_rank_of_ != nullptr) (void)cudaFree(device_team_rank_of_);
    device_team_rank_of_ = nullptr;
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    stream_ = nullptr;
    (void)cudaGetLastError();
    if (previous >= 0 && previous != device_) (void)cudaSetDevice(previous);
    device_ = -1;
  }

  Team& team_;
  int device_ = -1;                 // this rank's GPU, as this process numbers it
  cudaStream_t stream_ = nullptr;   // for zeroing and the table kernel
  NodeCommunicatorRanks node_ranks_;  // the team ranks comm_ holds: this node's
  ncclComm_t comm_ = nullptr;          // over node_ranks_ (the whole team on one node)
  int* device_team_rank_of_ = nullptr; // node_ranks_.team_rank_of on the GPU, for the table kernel
  std::unique_ptr<nccl_device::DeviceComm> dev_comm_;
  LiveAllocations<Window> live_;   // live windows
};

}  // namespace

ProviderEntry nccl_entry() {
  ProviderEntry entry;
  entry.name = kWho;
  entry.status = [] {
    ProviderStatus status{kWho, true, false, {}};
    const int version = runtime_version();
    if (version < kMinimumVersion) {
      status.reason = format("NCCL {} was found at run time (built against {}); the nccl provider needs NCCL 2.28 or "
                             "newer for its device API; put a newer libnccl.so.2 first on the library path",
                             version == 0 ? std::string("(unknown version)") : version_text(version),
                             version_text(NCCL_VERSION_CODE));
      return status;
    }
    std::string why;
    const int count = gpus_for_status(kWho, GpuSharing::refused, why);
    if (count == 0) {
      status.reason = why;
      return status;
    }
    status.available = true;
    status.reason = format("ncclMemAlloc + symmetric windows (NCCL {}), a table per allocation from ncclGetPeerPointer; "
                           "{} GPU(s) here, each rank uses GPU local_rank % {}; peers outside the load/store team are "
                           "not direct (on other nodes, under mpirun: reached through the message engine; NCCL's "
                           "communicator holds one node's ranks)",
                           version_text(version), count, count);
    return status;
  };
  entry.make = [](Team& team) -> std::unique_ptr<Provider> { return std::make_unique<NcclProvider>(team); };
  return entry;
}

}  // namespace aperture::detail
