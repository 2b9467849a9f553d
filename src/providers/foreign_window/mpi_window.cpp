// The "mpi-window" provider: memory owned by MPI, one shared-memory window per allocation.
//
// MPI_Win_allocate_shared over the ranks of this machine (MPI_Comm_split_type SHARED) gives each
// rank a segment that every rank of the machine has mapped; MPI_Win_shared_query says where.
// Each window is mapped at its own place, so the heap is not linear: every allocation carries its
// own table. Ranks on other machines get entry 0 (not direct).
//
// Memory that cannot be had: Open MPI refuses a window larger than /dev/shm's free space on the
// rank that notices while the others stay in MPI_Win_allocate_shared, so every request is first
// checked on every rank against the backing directory's free space (backing_space.h) and refused
// on all of them together, with one allgather, before MPI sees it.
//
// Every MPI call runs on communicators split from the bootstrap's MPI_ERRORS_RETURN duplicate of
// MPI_COMM_WORLD and has its return code checked: a failure is an aperture::Error, not an abort.
//
// Ranks: the team's communicator is MPI_COMM_WORLD reordered so that its rank i is team rank i,
// so MPI ranks and table indices never have to agree by accident.
//
// Collective: the constructor, allocate, free and the destructor (which frees the windows still
// allocated with MPI_Win_free, itself collective). Destroy the provider on every rank, before
// MPI is finalized; after MPI_Finalize the destructor only forgets the windows.
// The C API only: the deprecated MPI C++ bindings warn under -Wextra and are never used here.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "aperture/error.h"
#include "aperture/provider.h"
#include "aperture/team.h"
#include "bootstrap/launched_by.h"
#include "bootstrap/mpi.h"
#include "bootstrap/mpi_comm.h"
#include "common/env.h"
#include "common/mpi_check.h"
#include "common/format.h"
#include "engines/engine_attachment.h"
#include "providers/foreign_window/backing_space.h"
#include "providers/live_allocations.h"
#include "providers/provider_common.h"
#include "providers/registry.h"

namespace aperture::detail {

namespace {

constexpr const char* kNeedsMpirun =
    "needs ranks that MPI knows: started by mpirun or by `srun --mpi=pmix`; run under `aperture launch --mpi -n N -- "
    "prog` or `mpirun -n N prog`";

std::uintptr_t align_up(std::uintptr_t address, std::size_t alignment) {
  return (address + alignment - 1) & ~(static_cast<std::uintptr_t>(alignment) - 1);
}

// Room for Open MPI's own state in a window's backing file, beyond the ranks' segments.
constexpr std::uint64_t kWindowFileSlack = std::uint64_t{1} << 20;

// A live window: what MPI must free, and this rank's segment of it (its untouched pages are
// space /dev/shm has promised to the window; each rank counts its own, the machine sums them).
struct Window {
  MPI_Win win = MPI_WIN_NULL;
  const void* own_segment = nullptr;
  std::size_t own_segment_bytes = 0;
};

class MpiWindowProvider final : public Provider {
 public:
  explicit MpiWindowProvider(Team& team) : team_(team) {
    const MpiWorld world = mpi_world();
    team_.check_same("mpi-window start", {{"mpi_world_size", static_cast<std::uint64_t>(world.size)}});
    if (world.size != team_.size())
      throw Error(
          ErrorCode::mismatch,
          detail::format("mpi-window: the team has {} ranks but MPI_COMM_WORLD has {}; the provider needs a team of "
                         "every rank mpirun started (Team::from_env() under mpirun)",
                         team_.size(), world.size));
    // Which MPI rank is each team rank? Normally the same number, but nothing below assumes so.
    std::vector<std::int32_t> world_rank_of(team_.size());
    const std::int32_t mine = world.rank;
    team_.allgather(&mine, world_rank_of.data(), sizeof mine);
    std::vector<std::int32_t> sorted(world_rank_of);
    std::sort(sorted.begin(), sorted.end());
    for (int r = 0; r < team_.size(); ++r)
      if (sorted[r] != r)
        throw Error(
            ErrorCode::mismatch,
            detail::format("mpi-window: team ranks do not cover MPI_COMM_WORLD's ranks 0..{} once each (world rank {} "
                           "appears out of place); the team must be the job mpirun started",
                           world.size - 1, sorted[r]));

    // Split from the bootstrap's MPI_ERRORS_RETURN duplicate: a failed split returns its code on
    // every rank instead of aborting the job under MPI_COMM_WORLD's fatal handler.
    std::string error;
    try {
      error = mpi_failure(MPI_Comm_split(mpi_errors_return_world(), 0, team_.rank(), &team_comm_),
                          "MPI_Comm_split(MPI_COMM_WORLD's duplicate) into the team's rank order");
    } catch (const Error& e) {
      error = std::string(e.detail());
    }
    if (error.empty())
      error = mpi_failure(MPI_Comm_set_errhandler(team_comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    // The ranks of this rank's node, as the team sees nodes (the machine, or the split that
    // `aperture launch --nodes` or APERTURE_NODES makes): only they share windows.
    if (error.empty())
      error = mpi_failure(MPI_Comm_split(team_comm_, team_.node(), team_.rank(), &node_comm_),
                          "MPI_Comm_split of the team by node");
    int node_size = 0;
    if (error.empty()) error = mpi_failure(MPI_Comm_size(node_comm_, &node_size), "MPI_Comm_size(node)");
    if (error.empty()) {
      team_of_node_rank_.assign(static_cast<std::size_t>(node_size), -1);
      const int team_rank = team_.rank();
      error = mpi_failure(MPI_Allgather(&team_rank, 1, MPI_INT, team_of_node_rank_.data(), 1, MPI_INT, node_comm_),
                          "MPI_Allgather of team ranks over the node communicator");
    }
    if (error.empty()) {
      int team_comm_rank = -1;
      error = mpi_failure(MPI_Comm_rank(team_comm_, &team_comm_rank), "MPI_Comm_rank(team)");
      if (error.empty() && team_comm_rank != team_.rank())
        error = detail::format("the team communicator gave rank {} to team rank {}", team_comm_rank, team_.rank());
    }
    try {
      agree_or_throw(team_, "mpi-window", "creating its communicators", error);
    } catch (...) {
      release_communicators();  // the destructor does not run for a constructor that throws
      throw;
    }
  }

  ~MpiWindowProvider() override {
    // Collective, like MPI_Win_free: every rank destroys its provider with the same windows live.
    // Skipped after MPI_Finalize (it released everything) and while an exception unwinds: ranks
    // may be out of step then, and MPI_Win_free would wait for ranks that never come.
    if (!mpi_is_active() || std::uncaught_exceptions() > 0) {
      for (auto* window : windows_.oldest_first()) window->engine.abandon();
      return;
    }
    // Return codes are not checked here: a destructor cannot throw, and MPI_ERRORS_RETURN keeps
    // a failure from aborting the job.
    for (auto* window : windows_.oldest_first()) {
      window->engine.release();
      (void)MPI_Win_free(&window->resource.win);
    }
    release_communicators();
  }

  std::string_view name() const override { return "mpi-window"; }
  MemoryKind memory_kind() const override { return MemoryKind::host; }
  bool is_linear() const override { return false; }

  Allocation allocate(std::size_t bytes, std::size_t alignment) override {
    // Compare first, so a rank with other arguments fails every rank instead of hanging them.
    team_.check_same("mpi-window allocate", {{"bytes", bytes}, {"alignment", alignment}});
    check_allocation_request("mpi-window", bytes, alignment);
    require_mpi("allocate");

    // At least one byte, so an empty allocation still has an address of its own; alignment - 1
    // more, because MPI promises no alignment and each rank aligns its own segment.
    const std::size_t usable = std::max<std::size_t>(bytes, 1);
    const std::size_t requested = usable + alignment - 1;
    refuse_unless_room(bytes, requested);

    MPI_Info info = MPI_INFO_NULL;
    std::string error = mpi_failure(MPI_Info_create(&info), "MPI_Info_create");
    // Each rank's segment on pages of its own: no cache line shared by two ranks' memory.
    if (error.empty())
      error = mpi_failure(MPI_Info_set(info, "alloc_shared_noncontig", "true"), "MPI_Info_set(alloc_shared_noncontig)");
    // Every rank reaches the collective call, whatever happened before it on this rank: a rank
    // that skipped it would leave the others inside MPI_Win_allocate_shared.
    void* base = nullptr;
    MPI_Win win = MPI_WIN_NULL;
    const std::string allocation_error = mpi_failure(
        MPI_Win_allocate_shared(static_cast<MPI_Aint>(requested), 1, info, node_comm_, &base, &win),
        detail::format("MPI_Win_allocate_shared({} bytes)", requested));
    if (error.empty()) error = allocation_error;
    if (info != MPI_INFO_NULL) {
      const std::string freeing = mpi_failure(MPI_Info_free(&info), "MPI_Info_free");
      if (error.empty()) error = freeing;
    }
    if (error.empty()) error = mpi_failure(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN), "MPI_Win_set_errhandler");
    if (error.empty() && base == nullptr)
      error = detail::format("MPI_Win_allocate_shared({} bytes) returned no memory", requested);

    // Each rank aligns its own copy; the offsets may differ (the segments are mapped at unrelated
    // addresses), so every rank publishes its own and the table adds each peer's.
    struct Published {
      std::uint64_t offset;
      std::uint64_t failed;
    };
    const auto local = reinterpret_cast<std::uintptr_t>(base);
    const Published me{error.empty() ? align_up(local, alignment) - local : 0, error.empty() ? 0u : 1u};
    std::vector<Published> everyone(team_.size());
    team_.allgather(&me, everyone.data(), sizeof me);

    std::vector<std::int64_t> table(team_.size(), 0);
    Window window{win, {}};
    for (int node_rank = 0; error.empty() && node_rank < static_cast<int>(team_of_node_rank_.size()); ++node_rank) {
      const int peer = team_of_node_rank_[node_rank];
      MPI_Aint segment_bytes = 0;
      int displacement_unit = 0;
      void* peer_base = nullptr;
      error = mpi_failure(MPI_Win_shared_query(win, node_rank, &segment_bytes, &displacement_unit, &peer_base),
                          detail::format("MPI_Win_shared_query(rank {})", peer));
      if (!error.empty() || everyone[peer].failed) break;  // that rank reports its own failure
      if (peer_base == nullptr || static_cast<std::uint64_t>(segment_bytes) < everyone[peer].offset + usable) {
        error = detail::format("MPI_Win_shared_query(rank {}) gave a segment of {} bytes at {}, too small for {} bytes at "
                       "offset {}",
                       peer, segment_bytes, peer_base, usable, everyone[peer].offset);
        break;
      }
      table[peer] = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(peer_base) + everyone[peer].offset);
      if (peer == team_.rank()) {
        window.own_segment = peer_base;
        window.own_segment_bytes = static_cast<std::size_t>(segment_bytes);
      }
    }
    void* ptr = error.empty() ? reinterpret_cast<void*>(local + me.offset) : nullptr;
    if (error.empty() && table[team_.rank()] != reinterpret_cast<std::int64_t>(ptr))
      error = detail::format("MPI_Win_shared_query maps this rank's own segment at {:#x}, not at {}",
                     table[team_.rank()], ptr);
    try {
      // A rank that failed before the exchange still holds its error, so one agreement covers both halves.
      agree_or_throw(team_, "mpi-window", "allocating a window", error);
    } catch (...) {
      if (win != MPI_WIN_NULL) MPI_Win_free(&win);  // collective: every rank gets here together
      throw;
    }

    Allocation allocation;
    allocation.ptr = ptr;
    allocation.bytes = bytes;
    allocation.map = SymmetricAddressMap::from_table("mpi-window", team_.rank(), std::move(table), bytes);
    // Ranks on other nodes reach the window's memory through MPI RMA (src/engines/engine.h).
    windows_.add(allocation, window, EngineAttachment(open_engine_over_host_memory(team_, ptr, usable)));
    return allocation;
  }

  void free(Allocation& allocation) override {
    auto entry = windows_.take_for_free(team_, "mpi-window", allocation);
    MPI_Win win = entry.resource.win;
    require_mpi("free");
    entry.engine.close();
    const std::string error = mpi_failure(MPI_Win_free(&win), "MPI_Win_free");
    if (!error.empty()) throw Error(ErrorCode::system, "mpi-window free: " + error);
  }

  SymmetricAddressMap symmetric_address_map(const void* ptr, std::size_t bytes) const override {
    if (auto view = windows_.view_of("mpi-window", ptr, bytes, [&](auto table) {
          return SymmetricAddressMap::from_table("mpi-window", team_.rank(), std::move(table), bytes);
        }))
      return *std::move(view);
    throw Error(
        ErrorCode::invalid_argument,
        detail::format("mpi-window symmetric_address_map: [{}, +{} bytes) is not inside a live allocation of this "
                       "provider ({} windows live); describe only memory this provider allocated and has not freed",
                       ptr, bytes, windows_.size()));
  }

 private:
  void release_communicators() {
    // Not checked: called from the destructor and from a constructor already throwing.
    if (node_comm_ != MPI_COMM_NULL) (void)MPI_Comm_free(&node_comm_);
    if (team_comm_ != MPI_COMM_NULL) (void)MPI_Comm_free(&team_comm_);
  }

  // Collective, before MPI_Win_allocate_shared: every rank checks that the backing directory of
  // its machine has room for the window file this request makes there (every rank's segment of
  // `requested` bytes, in whole pages, and Open MPI's slack), counting the pages this provider's
  // live windows have promised but not written as taken; one allgather, and every rank refuses
  // together (out_of_memory) when any machine lacks the room.
  void refuse_unless_room(std::size_t bytes, std::size_t requested) {
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t segment = (requested + page - 1) / page * page;
    const auto node_ranks = static_cast<std::uint64_t>(team_of_node_rank_.size());
    const BackingSpace space = mpi_window_backing_space();
    std::uint64_t promised = 0;  // by this rank's own segments; the machine's is the sum over its ranks
    for (auto* entry : windows_.oldest_first())
      promised += untouched_bytes(entry->resource.own_segment, entry->resource.own_segment_bytes);
    struct Room {
      std::uint64_t needed;
      std::uint64_t free_bytes;
      std::uint64_t promised;
      std::uint64_t statvfs_failed;
      std::int64_t machine;  // the lowest team rank of this rank's machine: who shares its /dev/shm
    };
    // needed cannot overflow: bytes <= 2^48 (check_allocation_request) and node ranks <= 65536.
    const Room mine{segment * node_ranks + kWindowFileSlack, space.free_bytes, promised, space.error.empty() ? 0u : 1u,
                    *std::min_element(team_of_node_rank_.begin(), team_of_node_rank_.end())};
    std::vector<Room> all(team_.size());
    team_.allgather(&mine, all.data(), sizeof mine);
    for (int r = 0; r < team_.size(); ++r) {
      Room room = all[r];
      room.promised = 0;
      for (const Room& other : all)
        if (other.machine == room.machine) room.promised += other.promised;
      const std::uint64_t available = room.free_bytes > room.promised ? room.free_bytes - room.promised : 0;
      if (room.statvfs_failed == 0 && room.needed <= available) continue;
      if (r == team_.rank() && !space.error.empty())
        throw Error(ErrorCode::system, detail::format("mpi-window allocate({} bytes): {}", bytes, space.error), "statvfs");
      if (room.statvfs_failed != 0)
        throw Error(ErrorCode::system, detail::format("mpi-window allocate({} bytes): rank {} cannot read how much room "
                                                      "its machine's window directory has; see its error",
                                                      bytes, r));
      throw Error(
          ErrorCode::out_of_memory,
          detail::format("mpi-window allocate: {} bytes cannot be had: rank {}'s machine needs {} bytes in {} for the "
                         "window ({} ranks x {} bytes, and {} for MPI) but has {} bytes free, {} of them promised to "
                         "this provider's live windows ({} available); refused on every rank before "
                         "MPI_Win_allocate_shared. Free allocations, or give {} more room (e.g. `mount -o "
                         "remount,size=...` of /dev/shm, docker --shm-size), or point OMPI_MCA_osc_sm_backing_directory "
                         "at a larger local file system",
                         bytes, r, room.needed, space.directory, node_ranks, segment, kWindowFileSlack,
                         room.free_bytes, room.promised, available, space.directory));
    }
  }

  void require_mpi(const char* call) const {
    if (!mpi_is_active())
      throw Error(ErrorCode::unavailable,
                  detail::format("mpi-window {}: MPI is no longer active (MPI_Finalize or shmem_finalize ran); use the "
                                 "provider only before MPI is finalized",
                                 call));
  }


  Team& team_;
  MPI_Comm team_comm_ = MPI_COMM_NULL;  // MPI_COMM_WORLD with team ranks as its ranks
  MPI_Comm node_comm_ = MPI_COMM_NULL;  // the ranks of team_comm_ that share this machine's memory
  std::vector<int> team_of_node_rank_;  // node_comm_ rank -> team rank
  LiveAllocations<Window> windows_;     // live windows, each with its engine when the job spans nodes
};

std::string open_mpi_version() {
#if defined(OMPI_MAJOR_VERSION)
  return detail::format("Open MPI {}.{}.{}", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION);
#else
  return detail::format("MPI {}.{}", MPI_VERSION, MPI_SUBVERSION);
#endif
}

bool mpi_started_this_job() { return mpi_knows_the_ranks(env::process()); }

}  // namespace

ProviderEntry mpi_window_entry() {
  ProviderEntry entry;
  entry.name = "mpi-window";
  entry.status = [] {
    ProviderStatus status{"mpi-window", true, false, {}};
    if (!mpi_started_this_job()) {
      status.reason = kNeedsMpirun;
      return status;
    }
    status.available = true;
    status.reason = detail::format("MPI_Win_allocate_shared windows ({}), ranks of one machine direct", open_mpi_version());
    return status;
  };
  entry.make = [](Team& team) -> std::unique_ptr<Provider> {
    if (!mpi_started_this_job() || !mpi_knows_the_ranks(team))
      throw Error(ErrorCode::unavailable, detail::format("provider 'mpi-window' {} (this team was started by '{}')",
                                                         kNeedsMpirun, team.launched_by()));
    return std::make_unique<MpiWindowProvider>(team);
  };
  return entry;
}

}  // namespace aperture::detail
