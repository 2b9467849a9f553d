// src/bootstrap/mpi.cpp — MPI as a bootstrap: start it if nobody did, finish only what we started.
//
// Finalisation order matters when OpenSHMEM runs in the same process (Open MPI's oshmem sits on
// top of MPI): shmem_finalize must come first. Our MPI_Finalize is an exit handler registered
// when MPI starts; the openshmem provider registers its shmem_finalize later, and exit runs
// handlers in reverse, so OpenSHMEM always goes first. Open MPI 4.1's shmem_finalize finalises
// MPI itself, which is why the handler checks that MPI is still active before doing anything.
#include "bootstrap/mpi.h"

// The C API only: the deprecated MPI C++ bindings warn under -Wextra and are never used here.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "aperture/error.h"
#include "common/mpi_check.h"
#include "common/format.h"

namespace aperture::detail {

namespace {

// What a failed bootstrap call asks the user to check.
constexpr std::string_view kBootstrapHint =
    "; check that every rank was started by the same mpirun and that no rank has exited";

void check_bootstrap_mpi(int code, std::string_view call) { detail::check_mpi(code, call, kBootstrapHint); }

struct MpiState {
  std::mutex mutex;
  bool we_initialised = false;
  // MPI_COMM_WORLD's twin with MPI_ERRORS_RETURN, so a failed bootstrap call becomes an
  // aperture::Error instead of aborting the job (and the user's MPI_COMM_WORLD keeps its handler).
  MPI_Comm comm = MPI_COMM_NULL;
};

MpiState& state() {
  static MpiState* instance = new MpiState;  // never destroyed: the exit handler still needs it
  return *instance;
}

bool active() {
  int initialised = 0;
  int finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  return initialised && !finalised;
}

// Runs at exit, with the exit status. A failing rank (status != 0) does not finalize: Open MPI's
// MPI_Finalize waits for every other rank, which may be waiting for this one; exiting at once
// lets mpirun see the failure, stop the job and report this rank's status. A rank that handled
// a lost rank's error and exits 0 does finalize, and waits there until mpirun, which stops the
// job once a rank died, kills it: a rank that exits without MPI_Finalize makes mpirun kill every
// other rank at once, before the other survivors have reported what they saw (tried 2026-12-04:
// multinode.collectives.node-kill then lost rank 0's report in most runs).
void finalize_if_ours(int status, void*) {
  MpiState& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.we_initialised || !active() || status != 0) return;  // OpenSHMEM's finalize may have done it
  if (s.comm != MPI_COMM_NULL) MPI_Comm_free(&s.comm);
  MPI_Finalize();
}

void register_finalize_at_exit() {
#if defined(__GLIBC__)
  ::on_exit(finalize_if_ours, nullptr);  // like atexit, but told the exit status
#else
  std::atexit([] { finalize_if_ours(0, nullptr); });
#endif
}

// Open MPI 4.1's oshmem registers an OPAL memory-release hook that lives in libmca_common_ucx and
// is never unregistered; shmem_finalize unloads that library and the next free() inside
// MPI_Finalize jumps into unmapped memory (SIGSEGV at exit, open-mpi/ompi#11604). With this MCA
// parameter UCX keeps its own hooks and OPAL's list stays empty. It must be in the environment
// before MPI reads its parameters, i.e. before MPI_Init; a value the user set is kept. The
// openshmem provider sets it too, for programs that started MPI themselves.
void prepare_environment_for_oshmem() {
#if APERTURE_WITH_OPENSHMEM
  ::setenv("OMPI_MCA_opal_common_ucx_opal_mem_hooks", "0", /*overwrite=*/0);
#endif
}

// The one-sided components the MPI RMA engine (src/engines/mpi_rma.cpp) can use in Open MPI 4.1:
// sm for shared-memory windows (mpi-window), ucx for the rest. pt2pt, the default where no RDMA
// network is, refuses MPI_THREAD_MULTIPLE, and rdma over TCP needs the target to call MPI.
// Before MPI_Init, like the variable above; a value the user set is kept.
void prepare_environment_for_rma() { ::setenv("OMPI_MCA_osc", "sm,ucx", /*overwrite=*/0); }

MPI_Comm bootstrap_comm(MpiState& s) {
  if (s.comm == MPI_COMM_NULL) {
    check_bootstrap_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &s.comm), "MPI_Comm_dup(MPI_COMM_WORLD)");
    check_bootstrap_mpi(MPI_Comm_set_errhandler(s.comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  }
  return s.comm;
}

}  // namespace

MpiWorld mpi_world() {
  MpiState& s = state();
  std::lock_guard lock(s.mutex);
  int initialised = 0;
  int finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  if (finalised)
    throw Error(ErrorCode::unavailable,
                "MPI was already finalized in this process, so it cannot bootstrap a Team; create the Team (and "
                "its providers) before MPI_Finalize or shmem_finalize");
  if (!initialised) {
    prepare_environment_for_oshmem();
    prepare_environment_for_rma();
    int provided = MPI_THREAD_SINGLE;
    check_bootstrap_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided),
                        "MPI_Init_thread(MPI_THREAD_MULTIPLE)");
    s.we_initialised = true;
    register_finalize_at_exit();
  }
  MpiWorld world;
  check_bootstrap_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world.rank), "MPI_Comm_rank(MPI_COMM_WORLD)");
  check_bootstrap_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world.size), "MPI_Comm_size(MPI_COMM_WORLD)");
  return world;
}

std::string mpi_broadcast_from_rank0(const std::string& value) {
  MpiState& s = state();
  std::lock_guard lock(s.mutex);
  if (!active())
    throw Error(ErrorCode::unavailable,
                "mpi_broadcast_from_rank0: MPI is not active (not initialised, or already finalized); call "
                "mpi_world() first");
  const MPI_Comm comm = bootstrap_comm(s);
  std::uint64_t length = value.size();
  check_bootstrap_mpi(MPI_Bcast(&length, 1, MPI_UINT64_T, 0, comm), "MPI_Bcast of the bootstrap message length");
  std::string result = value;
  result.resize(length);
  if (length > 0)
    check_bootstrap_mpi(MPI_Bcast(result.data(), static_cast<int>(length), MPI_CHAR, 0, comm),
                        detail::format("MPI_Bcast of the {}-byte bootstrap message", length));
  return result;
}

bool mpi_is_active() { return active(); }

void mpi_errors_return_world_into(void* comm_out) {
  MpiState& s = state();
  std::lock_guard lock(s.mutex);
  if (!active())
    throw Error(ErrorCode::unavailable,
                "MPI is not active (not initialised, or already finalized); make the Team under mpirun first");
  *static_cast<MPI_Comm*>(comm_out) = bootstrap_comm(s);
}

}  // namespace aperture::detail
