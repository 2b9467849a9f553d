// The "nvshmem" provider: GPU memory owned by NVSHMEM, the seed's rocSHMEM provider on NVIDIA.
//
// nvshmem_align allocates from NVSHMEM's symmetric heap, and nvshmem_ptr(ptr, pe) says where
// pe's copy of a heap address is mapped in this process (NULL: pe is not reachable by
// load/store, e.g. another node). NVSHMEM maps each peer's whole heap as one range, so the
// distance to a peer's copy is the same for every allocation and one table serves all of them.
// That is checked at start-up, not assumed: a second allocation is translated with the first
// one's table, compared with nvshmem_ptr, and stored through.
//
// A PE whose nvshmem_ptr is NULL (another node, or a GPU of this node without P2P) has entry 0,
// and the allocation's map gets the nvshmem engine (src/engines/nvshmem_engine.h): NVSHMEM's
// own host API (nvshmem_putmem, nvshmem_getmem, its atomics, nvshmem_quiet) over NVSHMEM's
// transports, from host code and, through aperture's GPU proxy, from kernels. No MPI is involved.
//
// Only NVSHMEM's host library is used (libnvshmem_host.so.3: nvshmemx_hostlib_init_attr,
// nvshmem_align, nvshmem_ptr, nvshmem_free), so aperture needs no relocatable device code and
// no libnvshmem_device.a. Kernels reach the memory through aperture's device operations; a
// program that also wants NVSHMEM's own device API initialises NVSHMEM itself (nvshmem_init or
// nvshmemx_init_attr, with libnvshmem_device.a) before making the provider, which then uses
// that runtime as it finds it (its PEs must be the team's ranks) and leaves finalizing to it.
//
// Start-up: NVSHMEM's unique-id bootstrap, the id made by rank 0 and broadcast over the Team,
// so `aperture launch`, mpirun and torchrun all work without an NVSHMEM launcher. Each rank
// takes GPU local_rank % device count (one GPU per rank), made current before NVSHMEM starts.
// NVLink multicast stays off (NVSHMEM_DISABLE_NVLS=1 unless the caller set it): aperture never
// uses it, and on a shared host it can take every GPU out of service.
//
// Memory that cannot be had: nvshmem_malloc beyond the symmetric heap does not come back as
// NULL that could be agreed on; NVSHMEM 3.4 reports "Not enough space" and then faults in its
// own barrier, killing the process. So the provider never asks NVSHMEM for what its heap cannot
// hold: it keeps a model of the heap (the same first-fit SymmetricHeap aperture's own heaps use,
// of NVSHMEM_SYMMETRIC_SIZE less a margin for NVSHMEM's own chunk headers), places every request
// in it first, and refuses what the model cannot place, with out_of_memory. The heap's size is
// compared across ranks at start-up and every rank runs the same calls on its model, so every
// rank decides alike without a further exchange. Limits: memory the program takes with
// nvshmem_malloc itself is not in the model; NVSHMEM's allocator may place blocks differently
// from first fit, so a heap fragmented to the last byte may be judged differently.
//
// Collective: the constructor, allocate, free and the destructor (which frees every allocation
// still live; nvshmem_free is collective).
//
// Process lifetime: NVSHMEM starts once per process, with the first provider, and is finalized
// at a successful exit (it cannot start again after that). A failing rank leaves without
// finalizing: nvshmemx_hostlib_finalize waits for every PE, and the others may be stuck
// elsewhere waiting for this one.
#include <nvshmem_host.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "aperture/error.h"
#include "aperture/provider.h"
#include "aperture/team.h"
#include "common/cuda_check.h"
#include "common/format.h"
#include "engines/engine_attachment.h"
#include "engines/nvshmem_engine.h"
#include "providers/cuda/foreign_gpu.h"
#include "providers/foreign_heap/linear_heap_layout.h"
#include "providers/live_allocations.h"
#include "providers/own_heap/symmetric_heap.h"
#include "providers/registry.h"

namespace aperture::detail {

namespace {

using foreign_gpu::agree_or_throw;

constexpr const char* kWho = "nvshmem";

void* peer_pointer(const void* ptr, int pe) { return nvshmem_ptr(ptr, pe); }

// "status 7 (NVSHMEMX_ERROR_INTERNAL)": NVSHMEM's host calls return these codes.
std::string nvshmem_status_text(int status) {
  const char* name = nullptr;
  switch (status) {
    case NVSHMEMX_SUCCESS: name = "NVSHMEMX_SUCCESS"; break;
    case NVSHMEMX_ERROR_INVALID_VALUE: name = "NVSHMEMX_ERROR_INVALID_VALUE"; break;
    case NVSHMEMX_ERROR_OUT_OF_MEMORY: name = "NVSHMEMX_ERROR_OUT_OF_MEMORY"; break;
    case NVSHMEMX_ERROR_NOT_SUPPORTED: name = "NVSHMEMX_ERROR_NOT_SUPPORTED"; break;
    case NVSHMEMX_ERROR_SYMMETRY: name = "NVSHMEMX_ERROR_SYMMETRY"; break;
    case NVSHMEMX_ERROR_GPU_NOT_SELECTED: name = "NVSHMEMX_ERROR_GPU_NOT_SELECTED"; break;
    case NVSHMEMX_ERROR_COLLECTIVE_LAUNCH_FAILED: name = "NVSHMEMX_ERROR_COLLECTIVE_LAUNCH_FAILED"; break;
    case NVSHMEMX_ERROR_INTERNAL: name = "NVSHMEMX_ERROR_INTERNAL"; break;
    default: break;
  }
  return name != nullptr ? format("status {} ({})", status, name) : format("status {}", status);
}

std::string nvshmem_version() {
  return format("{}.{}.{}", NVSHMEM_VENDOR_MAJOR_VERSION, NVSHMEM_VENDOR_MINOR_VERSION, NVSHMEM_VENDOR_PATCH_VERSION);
}

// NVSHMEM_SYMMETRIC_SIZE as NVSHMEM reads it: a number (a fraction allowed) and one optional
// suffix k/m/g/t (powers of 1024); 1 GiB when unset. `error` says what is wrong with a value
// NVSHMEM would refuse too.
std::size_t nvshmem_heap_size(std::string& error) {
  constexpr std::size_t kDefault = std::size_t{1} << 30;
  const char* text = std::getenv("NVSHMEM_SYMMETRIC_SIZE");
  if (text == nullptr || *text == '\0') return kDefault;
  char* end = nullptr;
  const double number = std::strtod(text, &end);
  double scale = 1;
  if (end != nullptr) switch (*end) {
      case 'k': case 'K': scale = 1024.0; break;
      case 'm': case 'M': scale = 1024.0 * 1024; break;
      case 'g': case 'G': scale = 1024.0 * 1024 * 1024; break;
      case 't': case 'T': scale = 1024.0 * 1024 * 1024 * 1024; break;
      case '\0': break;
      default: end = nullptr; break;
    }
  if (end == nullptr || end == text || !(number > 0) || number * scale > 1.0e15) {
    error = format("NVSHMEM_SYMMETRIC_SIZE='{}' is not a size NVSHMEM reads (e.g. 1G, 512m, 2.5G)", text);
    return kDefault;
  }
  return static_cast<std::size_t>(number * scale);
}

// What the model keeps free for NVSHMEM's own use of the heap: a header per block and some
// slack, so that a request the model places is one NVSHMEM can place too.
constexpr std::size_t kModelMargin = std::size_t{4} << 20;
constexpr std::size_t kModelPerBlock = 512;

// ---- the process-wide NVSHMEM runtime ----------------------------------------------------------

enum class RuntimeState { idle, owned, adopted, finalized };

struct Runtime {
  std::mutex mutex;
  RuntimeState state = RuntimeState::idle;
};

Runtime& runtime() {
  static Runtime* instance = new Runtime;  // never destroyed: the exit handler still needs it
  return *instance;
}

// Registered after NVSHMEM started (and so after the CUDA runtime did), so it runs before the
// CUDA runtime's own teardown. Finalizes only a runtime aperture started, and only on success.
void finalize_at_exit(int status, void*) {
  Runtime& r = runtime();
  {
    std::lock_guard lock(r.mutex);
    if (r.state != RuntimeState::owned) return;
    r.state = RuntimeState::finalized;
  }
  if (status == 0) nvshmemx_hostlib_finalize();
}

bool runtime_usable() {
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);
  return r.state == RuntimeState::owned || r.state == RuntimeState::adopted;
}

// Collective. Starts NVSHMEM over `team` on the current device, or adopts the one the program
// started; either way NVSHMEM's PEs must be the team's ranks.
void start_runtime(Team& team) {
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);  // held throughout: one start at a time in a process
  // Every rank must take the same branch, or some would wait in the bootstrap for the others.
  const int status = nvshmemx_init_status();
  const bool running_here = status >= NVSHMEM_STATUS_IS_INITIALIZED;
  std::string error;
  if (r.state == RuntimeState::finalized)
    error = "NVSHMEM was already finalized in this process and cannot start again; create nvshmem providers before "
            "the program starts exiting";
  else if (r.state == RuntimeState::idle && status == NVSHMEM_STATUS_IS_BOOTSTRAPPED)
    error = "NVSHMEM is half-initialised in this process (bootstrapped, no device selected); finish its "
            "initialisation (nvshmem_init / nvshmemx_init_attr) or leave it to the provider";
  const std::uint64_t mine = running_here ? 1 : 0;
  std::vector<std::uint64_t> all(team.size());
  team.allgather(&mine, all.data(), sizeof mine);
  for (int q = 0; q < team.size() && error.empty(); ++q)
    if (all[q] != mine)
      error = format("NVSHMEM is {} on this rank but {} on rank {}; start it on every rank or on none",
                     running_here ? "running" : "not running", all[q] != 0 ? "running" : "not running", q);
  agree_or_throw(team, kWho, "starting NVSHMEM", error);

  if (!running_here) {
    // Never multicast: aperture does not use it, and it can put a shared host's GPUs out of
    // service. A value the caller set is kept.
    ::setenv("NVSHMEM_DISABLE_NVLS", "1", /*overwrite=*/0);
    // One machine: no network transport to look for (saves probing for InfiniBand).
    if (team.local_size() == team.size()) ::setenv("NVSHMEM_REMOTE_TRANSPORT", "none", /*overwrite=*/0);

    nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
    if (team.rank() == 0) {
      if (const int rc = nvshmemx_get_uniqueid(&id); rc != 0)
        error = format("nvshmemx_get_uniqueid failed with {}", nvshmem_status_text(rc));
    }
    agree_or_throw(team, kWho, "making NVSHMEM's unique id", error);
    team.broadcast(&id, sizeof id, 0);

    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    if (const int rc = nvshmemx_set_attr_uniqueid_args(team.rank(), team.size(), &id, &attr); rc != 0) {
      error = format("nvshmemx_set_attr_uniqueid_args(rank {}, {} ranks) failed with {}", team.rank(), team.size(),
                     nvshmem_status_text(rc));
    } else if (const int rc2 = nvshmemx_hostlib_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr); rc2 != 0) {
      error = format("nvshmemx_hostlib_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID) failed with {}; run with "
                     "NVSHMEM_DEBUG=INFO to see NVSHMEM's reason",
                     nvshmem_status_text(rc2));
    } else {
      r.state = RuntimeState::owned;
#if defined(__GLIBC__)
      ::on_exit(finalize_at_exit, nullptr);  // like atexit, but told the exit status
#else
      std::atexit([] { finalize_at_exit(0, nullptr); });
#endif
    }
  } else if (r.state == RuntimeState::idle) {
    r.state = RuntimeState::adopted;  // the program started it and will finalize it
  }
  if (error.empty()) {
    // PE i must be team rank i: the table is indexed by team rank and filled by nvshmem_ptr(.., pe).
    const int pe = nvshmem_my_pe();
    const int pes = nvshmem_n_pes();
    if (pe != team.rank() || pes != team.size())
      error = format("NVSHMEM's PE {} of {} is not this team's rank {} of {}; NVSHMEM must run over the same ranks "
                     "as the team (one NVSHMEM job per process: every nvshmem provider of a process uses the same "
                     "team's ranks)",
                     pe, pes, team.rank(), team.size());
  }
  agree_or_throw(team, kWho, "starting NVSHMEM", error);
}

// ---- the provider --------------------------------------------------------------------------------

class NvshmemProvider final : public Provider {
 public:
  explicit NvshmemProvider(Team& team)
      : team_(team), layout_(kWho, "nvshmem_ptr", peer_pointer), heap_bytes_(nvshmem_heap_size(heap_size_error_)),
        model_(heap_bytes_ > kModelMargin ? heap_bytes_ - kModelMargin : 0) {
    team_.check_same("nvshmem provider start", {{"NVSHMEM_SYMMETRIC_SIZE", heap_bytes_}});
    agree_or_throw(team_, kWho, "reading NVSHMEM_SYMMETRIC_SIZE", heap_size_error_, ErrorCode::invalid_argument);
    choose_device();
    {
      CurrentDevice current(device_, kWho);
      start_runtime(team_);  // collective; make_provider has checked every rank asked for it
      learn_and_verify_linear_heap();
    }
    // Leave this rank's GPU current, as NVSHMEM expects for its later calls.
    APERTURE_CUDA_CHECK(cudaSetDevice(device_), kWho);
  }

  ~NvshmemProvider() override {
    // Collective, like nvshmem_free. Skipped after finalize (static destruction at exit: the
    // memory went with the heap) and while an exception unwinds: ranks may be out of step then,
    // and a collective free would wait for ranks that never come.
    if (!runtime_usable() || std::uncaught_exceptions() > 0) return;
    const auto by_age = live_.oldest_first();
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    if (previous != device_) (void)cudaSetDevice(device_);
    for (auto* entry : by_age) nvshmem_free(entry->resource.ptr);
    if (previous >= 0 && previous != device_) (void)cudaSetDevice(previous);
    (void)cudaGetLastError();
  }

  std::string_view name() const override { return kWho; }
  MemoryKind memory_kind() const override { return MemoryKind::device; }
  bool is_linear() const override { return true; }

  Allocation allocate(std::size_t bytes, std::size_t alignment) override {
    // Compare first, so a rank with other arguments fails every rank instead of hanging them.
    team_.check_same("nvshmem allocate", {{"bytes", bytes}, {"alignment", alignment}});
    check_allocation_request(kWho, bytes, alignment);
    require_running("allocate");
    // Placed in the model first: what the heap cannot hold never reaches nvshmem_align.
    const std::size_t modelled = std::max<std::size_t>(bytes, 1) + kModelPerBlock;
    const auto model_offset = model_.allocate(modelled, alignment);
    if (!model_offset)
      throw Error(ErrorCode::out_of_memory,
                  format("nvshmem allocate: {} bytes (alignment {}) cannot be had from NVSHMEM's symmetric heap of {} "
                         "bytes (NVSHMEM_SYMMETRIC_SIZE{}): {} in {} live allocations of this provider, largest free "
                         "block {} bytes ({} kept for NVSHMEM itself); refused on every rank before nvshmem_malloc, "
                         "which cannot fail safely. Free allocations or raise NVSHMEM_SYMMETRIC_SIZE (e.g. "
                         "NVSHMEM_SYMMETRIC_SIZE=4G), set before the first nvshmem provider starts",
                         bytes, alignment, heap_bytes_,
                         std::getenv("NVSHMEM_SYMMETRIC_SIZE") != nullptr ? format("={}", std::getenv("NVSHMEM_SYMMETRIC_SIZE")) : " unset: NVSHMEM's default",
                         model_.bytes_in_use(), live_.size(), model_.largest_free_block(), kModelMargin));
    struct GiveBack {
      SymmetricHeap& model;
      std::size_t offset;
      bool armed = true;
      ~GiveBack() { if (armed) model.free(offset); }
    } give_back{model_, *model_offset};
    CurrentDevice current(device_, kWho);
    // At least one byte, so an empty allocation still has an address of its own.
    void* ptr = nvshmem_align(alignment, std::max<std::size_t>(bytes, 1));
    std::string error;
    if (ptr == nullptr)
      error = format("nvshmem_align({}, {}) returned NULL: NVSHMEM's symmetric heap is full; free allocations or raise "
                     "NVSHMEM_SYMMETRIC_SIZE (e.g. NVSHMEM_SYMMETRIC_SIZE=4G)",
                     alignment, bytes);
    else if (reinterpret_cast<std::uintptr_t>(ptr) % alignment != 0)
      error = format("nvshmem_align({}, {}) returned {}, which is not aligned", alignment, bytes, ptr);
    // Zeroed like the other providers' fresh memory, so flags start at 0; agreeing on it is the
    // barrier that keeps every peer's stores after this rank's memset.
    if (error.empty()) error = APERTURE_CUDA_TRY(cudaMemset(ptr, 0, std::max<std::size_t>(bytes, 1)));
    if (error.empty()) error = APERTURE_CUDA_TRY(cudaDeviceSynchronize());
    agree_or_throw(team_, kWho, "allocating", error);

    Allocation allocation;
    allocation.ptr = ptr;
    allocation.bytes = bytes;
    std::vector<std::int64_t> table = layout_.table_of(ptr);
    EngineAttachment engine = engine_for(table, ptr, bytes);
    allocation.map = placed(std::move(table), bytes);
    live_.add(allocation, Block{ptr, *model_offset}, std::move(engine));
    give_back.armed = false;
    return allocation;
  }

  void free(Allocation& allocation) override {
    auto entry = live_.take_for_free(team_, kWho, allocation);
    const Block block = entry.resource;
    entry.engine.close();  // involves no other rank; its maps' calls refuse from now on
    require_running("free");
    CurrentDevice current(device_, kWho);
    nvshmem_free(block.ptr);
    model_.free(block.model_offset);
  }

  SymmetricAddressMap symmetric_address_map(const void* ptr, std::size_t bytes) const override {
    if (auto view = live_.view_of(kWho, ptr, bytes, [&](auto table) { return placed(std::move(table), bytes); }))
      return *std::move(view);
    return map_of_foreign_symmetric_memory(ptr, bytes);
  }

 private:
  void choose_device() {
    agree_or_throw(team_, kWho, "choosing its GPU", choose_own_gpu(team_, kWho, GpuSharing::refused, device_));
  }

  void require_running(const char* call) const {
    if (!runtime_usable())
      throw Error(ErrorCode::unavailable,
                  format("nvshmem {}: NVSHMEM is no longer running (it was finalized at exit); use the provider only "
                         "before the program exits",
                         call));
  }

  // Learns where each peer's heap is mapped (from allocation A) and proves the heap is linear:
  // allocation B, translated with A's table, must be where nvshmem_ptr says B is, and a value
  // stored there must arrive in the peer's own B.
  void learn_and_verify_linear_heap() {
    layout_.learn_and_verify(team_, nvshmem_malloc, nvshmem_free,
                             [this](void* b, const std::vector<std::int64_t>& table_b) {
                               return foreign_gpu::verify_peer_stores(team_, b, table_b);
                             });
  }

  SymmetricAddressMap placed(std::vector<std::int64_t> table, std::size_t bytes) const {
    TablePlacement placement = foreign_gpu::place_table_on_device(device_, table, "nvshmem device table");
    return SymmetricAddressMap::from_table(kWho, team_.rank(), std::move(table), bytes, std::move(placement));
  }

  // Symmetric memory the program got from NVSHMEM itself (its own nvshmem_malloc): nvshmem_ptr
  // answers for it directly, range end included, without assuming the heap's layout. Only
  // ranges clear of this provider's allocations come here; a range running past the end of the
  // program's own buffer cannot be told apart from the rest of the heap.
  SymmetricAddressMap map_of_foreign_symmetric_memory(const void* ptr, std::size_t bytes) const {
    const int me = team_.rank();
    const auto* first = static_cast<const unsigned char*>(ptr);
    const auto* last = bytes == 0 ? first : first + (bytes - 1);
    if (ptr == nullptr || !runtime_usable() || nvshmem_ptr(first, me) != first || nvshmem_ptr(last, me) != last)
      throw Error(ErrorCode::invalid_argument,
                  format("nvshmem symmetric_address_map: [{}, +{} bytes) is neither inside a live allocation of this "
                         "provider nor in NVSHMEM's symmetric heap (nvshmem_ptr does not know it); was it allocated "
                         "by another provider? describe memory from nvshmem_malloc or this provider's allocate",
                         ptr, bytes));
    std::vector<std::int64_t> table = layout_.table_of_foreign_range(ptr, bytes);
    EngineAttachment engine = engine_for(table, const_cast<void*>(ptr), bytes);
    SymmetricAddressMap map = placed(std::move(table), bytes);
    engine.attach(map, 0);  // the map keeps the engine alive; the program frees the memory itself
    return map;
  }

  // NVSHMEM's own engine where some PE is not mapped here (entry 0); none where every PE is.
  // Opening it involves no other rank, so each rank decides from its own table.
  EngineAttachment engine_for(const std::vector<std::int64_t>& table, void* ptr, std::size_t bytes) const {
    if (std::find(table.begin(), table.end(), 0) == table.end()) return {};
    const RemoteEngineChoice choice = choose_remote_engine(MemoryKind::device, /*allocator_transport=*/true,
                                                           EngineKind::messages, {});
    if (choice.engine != RemoteEngine::nvshmem) return {};
    return EngineAttachment(open_nvshmem_engine(ptr, std::max<std::size_t>(bytes, 1), device_));
  }

  struct Block {
    void* ptr;                  // from nvshmem_align
    std::size_t model_offset;   // its place in model_
  };

  Team& team_;
  int device_ = -1;                      // this rank's GPU, as this process numbers it
  LinearHeapLayout layout_;
  std::string heap_size_error_;          // set by nvshmem_heap_size when NVSHMEM_SYMMETRIC_SIZE is malformed
  std::size_t heap_bytes_;               // NVSHMEM_SYMMETRIC_SIZE, as NVSHMEM reads it
  SymmetricHeap model_;                  // where this provider's blocks would lie in that heap
  LiveAllocations<Block> live_;
};

}  // namespace

ProviderEntry nvshmem_entry() {
  ProviderEntry entry;
  entry.name = kWho;
  entry.status = [] {
    ProviderStatus status{kWho, true, false, {}};
    std::string why;
    const int count = gpus_for_status(kWho, GpuSharing::refused, why);
    if (count == 0) {
      status.reason = why;
      return status;
    }
    {
      Runtime& r = runtime();
      std::lock_guard lock(r.mutex);
      if (r.state == RuntimeState::finalized) {
        status.reason = "NVSHMEM was finalized in this process (the program is exiting)";
        return status;
      }
    }
    status.available = true;
    status.reason = format("nvshmem_malloc + nvshmem_ptr (NVSHMEM {}, host library only), one linear heap checked at "
                           "start-up; {} GPU(s) here, each rank uses GPU local_rank % {}; unique-id bootstrap over "
                           "the team (aperture launch, mpirun, torchrun)",
                           nvshmem_version(), count, count);
    return status;
  };
  entry.make = [](Team& team) -> std::unique_ptr<Provider> { return std::make_unique<NvshmemProvider>(team); };
  return entry;
}

}  // namespace aperture::detail
