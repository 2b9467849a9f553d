// The "openshmem" provider: memory owned by OpenSHMEM (Open MPI's oshmem), the seed's shape on a CPU.
//
// shmem_malloc/shmem_align allocate from one symmetric heap, and shmem_ptr(ptr, pe) says where
// pe's copy of a heap address is mapped here (NULL: pe is not reachable by load/store). Every
// allocation lies in the same heap mapping, so the distance to a peer's copy is the same for
// every allocation: one context-wide table serves them all. That is checked at start-up, not
// assumed: a second allocation is translated with the first one's table and written through.
//
// OpenSHMEM PEs must be the team's ranks (PE i == team rank i); the provider checks that.
//
// Collective: the constructor, allocate, free and the destructor (which shmem_frees every
// allocation still live; shmem_free is collective).
//
// Process lifetime: shmem_init runs once per process, when the first provider starts, and
// shmem_finalize at a successful exit (it cannot be undone, so destroying a provider does not
// end it; a failing rank leaves without it, see finalize_at_exit). Open MPI 4.1's
// shmem_finalize also finalizes MPI, and must run before MPI_Finalize: a program using this
// provider must not call MPI_Finalize itself.
#include <dlfcn.h>
#include <shmem.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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
#include "bootstrap/launched_by.h"
#include "common/env.h"
#include "common/format.h"
#include "engines/engine_attachment.h"
#include "providers/foreign_heap/linear_heap_layout.h"
#include "providers/live_allocations.h"
#include "providers/provider_common.h"
#include "providers/registry.h"

namespace aperture::detail {

namespace {

constexpr const char* kNeedsMpirun =
    "needs ranks started by mpirun; run under `aperture launch --mpi -n N -- prog` or `mpirun -n N prog`";

bool started_by_mpirun() { return has_launcher_variables(LaunchedBy::mpirun, env::process()); }

// ---- the process-wide OpenSHMEM runtime --------------------------------------------------------
//
// Open MPI 4.1.4's oshmem crashes with SIGSEGV at exit (inside shmem_finalize's MPI finalize,
// open-mpi/ompi#11604): its UCX layer registers an OPAL memory-release hook that lives in
// libmca_common_ucx and is never unregistered; shmem_finalize unloads that library and the next
// free() jumps into unmapped memory. That would turn every passing run into exit status 139.
// Two independent guards, each sufficient on its own (verified with oshrun -n 1..8):
//   1. OMPI_MCA_opal_common_ucx_opal_mem_hooks=0 before shmem_init: UCX uses its own memory
//      hooks and registers nothing with OPAL (a value the user set is kept);
//   2. one more reference to libmca_common_ucx (dlopen RTLD_NOLOAD, never closed), so a hook
//      registered anyway (the program ran shmem_init itself, or asked for OPAL hooks) still
//      points at mapped code.
void prepare_environment() { ::setenv("OMPI_MCA_opal_common_ucx_opal_mem_hooks", "0", /*overwrite=*/0); }

void keep_ucx_hooks_mapped() {
  // RTLD_NOLOAD: only a reference to what oshmem already loaded; nothing when the name differs.
  (void)::dlopen("libmca_common_ucx.so.40", RTLD_LAZY | RTLD_NOLOAD);
}

enum class RuntimeState { idle, running, finalized };

struct Runtime {
  std::mutex mutex;
  RuntimeState state = RuntimeState::idle;
};

Runtime& runtime() {
  static Runtime* instance = new Runtime;  // never destroyed: the exit handler still needs it
  return *instance;
}

// Registered after shmem_init, so it runs before aperture's MPI_Finalize handler (registered
// when MPI started) and before oshmem's own exit handler (which then has nothing left to do).
//
// A failing rank (status != 0) must not finalize: shmem_finalize starts with a barrier over every
// PE, and the others may be waiting for this rank elsewhere (a Team call), so the job would hang
// until a timeout instead of failing. oshmem's own exit handler finalizes whatever the status
// (Open MPI 4.1.4), so skipping our call is not enough: the rank leaves with _exit, after
// flushing its output, and mpirun sees the failure, stops the job and reports this status.
void finalize_at_exit(int status, void*) {
  Runtime& r = runtime();
  {
    std::lock_guard lock(r.mutex);
    if (r.state != RuntimeState::running) return;
    r.state = RuntimeState::finalized;
  }
  if (status == 0) {
    shmem_finalize();
    return;
  }
  std::fflush(nullptr);
  ::_exit(status);
}

void start_runtime() {
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);
  if (r.state == RuntimeState::running) return;
  if (r.state == RuntimeState::finalized)
    throw Error(ErrorCode::unavailable,
                "openshmem: OpenSHMEM was already finalized in this process and cannot start again; create "
                "openshmem providers before the program starts exiting");
  prepare_environment();
  int provided = -1;
  if (const int rc = shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided); rc != 0)
    throw Error(
        ErrorCode::system,
        detail::format("openshmem: shmem_init_thread(SHMEM_THREAD_MULTIPLE) failed with {}; start the ranks with "
                       "`mpirun`/`oshrun` and check that Open MPI's oshmem works here (`oshrun -n 2 hostname`)",
                       rc),
        "shmem_init_thread");
  keep_ucx_hooks_mapped();
  r.state = RuntimeState::running;
#if defined(__GLIBC__)
  ::on_exit(finalize_at_exit, nullptr);  // like atexit, but told the exit status
#else
  std::atexit([] { finalize_at_exit(0, nullptr); });
#endif
}

bool runtime_running() {
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);
  return r.state == RuntimeState::running;
}

// ---- the provider ------------------------------------------------------------------------------

// What rank `from` writes into rank `to`'s copy during the linear-heap check: distinct for
// every (writer, target) pair, so a store landing on the wrong rank or slot shows.
std::uint64_t stamp(int from, int to) {
  return 0x5A00'0000'0000'0000ull | (static_cast<std::uint64_t>(from) << 24) | static_cast<std::uint64_t>(to);
}
constexpr std::uint64_t kUntouched = ~std::uint64_t{0};

void* peer_pointer(const void* ptr, int pe) { return shmem_ptr(ptr, pe); }

class OpenShmemProvider final : public Provider {
 public:
  explicit OpenShmemProvider(Team& team) : team_(team), layout_("openshmem", "shmem_ptr", peer_pointer) {
    start_runtime();  // collective (shmem_init); make_provider has checked every rank asked for it
    check_pes_are_team_ranks();
    learn_and_verify_linear_heap();
  }

  ~OpenShmemProvider() override {
    // Collective, like shmem_free. Skipped after shmem_finalize (static destruction at exit: the
    // memory went with the heap) and while an exception unwinds: ranks may be out of step then,
    // and a collective free would wait for ranks that never come; the heap is released at exit.
    const bool in_step = runtime_running() && std::uncaught_exceptions() == 0;
    for (auto* entry : live_.oldest_first()) {
      if (!in_step) {
        entry->engine.abandon();
        continue;
      }
      entry->engine.release();
      shmem_free(entry->resource);
    }
  }

  std::string_view name() const override { return "openshmem"; }
  MemoryKind memory_kind() const override { return MemoryKind::host; }
  bool is_linear() const override { return true; }

  Allocation allocate(std::size_t bytes, std::size_t alignment) override {
    // Compare first, so a rank with other arguments fails every rank instead of hanging them.
    team_.check_same("openshmem allocate", {{"bytes", bytes}, {"alignment", alignment}});
    check_allocation_request("openshmem", bytes, alignment);
    require_running("allocate");
    // At least one byte, so an empty allocation still has an address of its own.
    // Every rank's heap holds the same allocations, so shmem_align fails on all of them alike
    // (checked with Open MPI 4.1: a request past the heap returns NULL on every PE, promptly);
    // agree_or_refuse then gives every rank the same out_of_memory error.
    void* ptr = shmem_align(alignment, std::max<std::size_t>(bytes, 1));
    std::string error;
    ErrorCode code = ErrorCode::system;
    if (ptr == nullptr) {
      error = heap_full(bytes, alignment);
      code = ErrorCode::out_of_memory;
    } else if (reinterpret_cast<std::uintptr_t>(ptr) % alignment != 0) {
      error = detail::format("shmem_align({}, {}) returned {}, which is not aligned", alignment, bytes, ptr);
    }
    agree_or_refuse(team_, "openshmem", "allocate", error, code);

    Allocation allocation;
    allocation.ptr = ptr;
    allocation.bytes = bytes;
    allocation.map = placed(layout_.table_of(ptr), bytes);
    // PEs on other nodes (shmem_ptr says NULL for them) are reached through MPI RMA on a window
    // over this allocation (src/engines/engine.h), when the job spans nodes.
    live_.add(allocation, ptr, EngineAttachment(open_engine_over_host_memory(team_, ptr, std::max<std::size_t>(bytes, 1))));
    return allocation;
  }

  void free(Allocation& allocation) override {
    auto entry = live_.take_for_free(team_, "openshmem", allocation);
    require_running("free");
    entry.engine.close();
    shmem_free(entry.resource);
  }

  SymmetricAddressMap symmetric_address_map(const void* ptr, std::size_t bytes) const override {
    if (auto view = live_.view_of("openshmem", ptr, bytes, [&](auto table) { return placed(std::move(table), bytes); }))
      return *std::move(view);
    return map_of_foreign_symmetric_memory(ptr, bytes);
  }

 private:
  void require_running(const char* call) const {
    if (!runtime_running())
      throw Error(ErrorCode::unavailable,
                  detail::format("openshmem {}: OpenSHMEM is no longer running (shmem_finalize ran at exit); use the "
                                 "provider only before the program exits",
                                 call));
  }

  // Why shmem_align gave no memory: the request, what this provider holds, the heap's size and
  // the variables that set it.
  std::string heap_full(std::size_t bytes, std::size_t alignment) {
    std::uint64_t in_use = 0;
    for (auto* entry : live_.oldest_first()) in_use += entry->map.allocation_bytes;
    std::string size_setting;
    for (const char* variable : {"SHMEM_SYMMETRIC_HEAP_SIZE", "SMA_SYMMETRIC_SIZE", "SHMEM_SYMMETRIC_SIZE"})
      if (const char* value = std::getenv(variable); value != nullptr && size_setting.empty())
        size_setting = detail::format("{}={}", variable, value);
    if (size_setting.empty()) size_setting = "not set: Open MPI's default size";
    return detail::format("shmem_align({}, {}) returned NULL: {} bytes cannot be had from OpenSHMEM's symmetric heap "
                          "({}), which holds {} bytes in {} live allocations of this provider (and whatever the program "
                          "took with shmem_malloc itself); free allocations or raise the heap's size: "
                          "SHMEM_SYMMETRIC_HEAP_SIZE (e.g. SHMEM_SYMMETRIC_HEAP_SIZE=1G; Open MPI 4.1 reads it and "
                          "SMA_SYMMETRIC_SIZE, not the standard's SHMEM_SYMMETRIC_SIZE)",
                          alignment, bytes, bytes, size_setting, in_use, live_.size());
  }

  // PE i must be team rank i: the table is indexed by team rank and filled by shmem_ptr(.., pe).
  void check_pes_are_team_ranks() {
    struct Identity {
      std::int32_t pe;
      std::int32_t n_pes;
    };
    const Identity mine{shmem_my_pe(), shmem_n_pes()};
    std::vector<Identity> all(team_.size());
    team_.allgather(&mine, all.data(), sizeof mine);
    std::string mismatches;
    for (int r = 0; r < team_.size(); ++r)
      if (all[r].pe != r || all[r].n_pes != team_.size())
        mismatches += detail::format("\n  team rank {} of {} is OpenSHMEM PE {} of {}", r, team_.size(), all[r].pe,
                             all[r].n_pes);
    if (!mismatches.empty())
      throw Error(
          ErrorCode::mismatch,
          detail::format("openshmem: OpenSHMEM's PEs are not the team's ranks:{}\nStart the program with "
                         "`mpirun -n N` (or `oshrun -n N`) and build the team with Team::from_env(), so that both "
                         "come from the same job",
                         mismatches));
  }

  // Learns where each peer's heap is mapped and proves the heap is linear (LinearHeapLayout);
  // the stores through the second buffer's table are host stores into the peers' copies.
  void learn_and_verify_linear_heap() {
    layout_.learn_and_verify(team_, shmem_malloc, shmem_free,
                             [this](void* probe, const std::vector<std::int64_t>& table) {
                               return prove_host_stores(static_cast<std::uint64_t*>(probe), table);
                             });
  }

  // Every rank stores its stamp into slot [me] of every direct peer's probe through `table`,
  // then checks that its own probe holds exactly the stamps of the ranks that reached it.
  std::string prove_host_stores(std::uint64_t* probe, const std::vector<std::int64_t>& table) {
    const int n = team_.size();
    const int me = team_.rank();
    for (int q = 0; q < n; ++q) std::atomic_ref(probe[q]).store(kUntouched, std::memory_order_relaxed);
    shmem_barrier_all();  // every probe is initialised before anyone writes into it
    std::vector<std::uint8_t> stored(n, 0);
    for (int p = 0; p < n; ++p) {
      if (table[p] == 0) continue;
      std::atomic_ref(reinterpret_cast<std::uint64_t*>(table[p])[me]).store(stamp(me, p), std::memory_order_relaxed);
      stored[p] = 1;
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    shmem_barrier_all();  // every store has landed

    std::vector<std::uint8_t> stored_by(static_cast<std::size_t>(n) * n);
    team_.allgather(stored.data(), stored_by.data(), static_cast<std::size_t>(n));
    std::string error;
    for (int q = 0; q < n; ++q) {
      const std::uint64_t expected = stored_by[static_cast<std::size_t>(q) * n + me] ? stamp(q, me) : kUntouched;
      const std::uint64_t seen = std::atomic_ref(probe[q]).load(std::memory_order_acquire);
      if (seen != expected)
        error += detail::format("\n  slot {} of this rank's probe holds {:#x}, expected {:#x}", q, seen, expected);
    }
    if (!error.empty()) error = "a store through the peer table did not arrive where it should:" + error;
    return error;
  }

  SymmetricAddressMap placed(std::vector<std::int64_t> table, std::size_t bytes) const {
    return SymmetricAddressMap::from_table("openshmem", team_.rank(), std::move(table), bytes);  // host table
  }

  // Symmetric memory the program got from OpenSHMEM itself (its own shmem_malloc, or a global):
  // shmem_ptr answers for it directly, range end included, without assuming the heap's layout.
  // Only ranges clear of this provider's allocations come here; a range running past the end of
  // the program's own buffer cannot be told apart from the rest of the heap.
  SymmetricAddressMap map_of_foreign_symmetric_memory(const void* ptr, std::size_t bytes) const {
    const auto* first = static_cast<const unsigned char*>(ptr);
    const auto* last = bytes == 0 ? first : first + (bytes - 1);
    if (ptr == nullptr || !runtime_running() || !shmem_addr_accessible(first, team_.rank()) ||
        !shmem_addr_accessible(last, team_.rank()))
      throw Error(
          ErrorCode::invalid_argument,
          detail::format("openshmem symmetric_address_map: [{}, +{} bytes) is neither inside a live allocation of this "
                         "provider nor symmetric OpenSHMEM memory (shmem_addr_accessible says no); describe memory "
                         "from shmem_malloc or this provider's allocate",
                         ptr, bytes));
    return placed(layout_.table_of_foreign_range(ptr, bytes), bytes);
  }

  Team& team_;
  LinearHeapLayout layout_;
  LiveAllocations<void*> live_;  // each with its shmem_align pointer, and its engine when the job spans nodes
};

std::string status_reason() {
  std::string reason = detail::format("shmem_malloc + shmem_ptr (Open MPI {}.{}.{} oshmem), one linear heap",
                              OSHMEM_MAJOR_VERSION, OSHMEM_MINOR_VERSION, OSHMEM_RELEASE_VERSION);
  // Observed with Open MPI 4.1.4: only the default "ucx" segment is mapped into the peers; with
  // "mmap" or "sysv" segments shmem_ptr returns NULL for every other PE.
  if (const char* sshmem = std::getenv("OMPI_MCA_sshmem"); sshmem != nullptr && std::string(sshmem) != "ucx")
    reason += detail::format("; with OMPI_MCA_sshmem={} other ranks are not directly addressable (shmem_ptr returns NULL)",
                     sshmem);
  return reason;
}

}  // namespace

ProviderEntry openshmem_entry() {
  ProviderEntry entry;
  entry.name = "openshmem";
  entry.status = [] {
    ProviderStatus status{"openshmem", true, false, {}};
    if (!started_by_mpirun()) {
      status.reason = kNeedsMpirun;
      return status;
    }
    status.available = true;
    status.reason = status_reason();
    return status;
  };
  entry.make = [](Team& team) -> std::unique_ptr<Provider> {
    if (!started_by_mpirun() || launched_by(team) != LaunchedBy::mpirun)
      throw Error(ErrorCode::unavailable, detail::format("provider 'openshmem' {} (this team was started by '{}')",
                                                         kNeedsMpirun, team.launched_by()));
    return std::make_unique<OpenShmemProvider>(team);
  };
  return entry;
}

}  // namespace aperture::detail
