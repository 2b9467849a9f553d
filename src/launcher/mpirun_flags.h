// src/launcher/mpirun_flags.h — the one list of flags `aperture launch --mpi` gives Open MPI's mpirun.
//
// mpirun -n N <kMpirunFlags...> --tag-output PROGRAM ARGS...
//   --oversubscribe         more ranks than cores is normal here (tests run 8 ranks on 2 cores)
//   --bind-to none          bound ranks on an oversubscribed machine would share one core
//   --mca btl self,vader    shared memory and self only: the ranks are all on this machine
//   --mca pml ob1           the plain point-to-point layer over btl; UCX's adds start-up cost
//   --mca mpi_yield_when_idle 1
//                           MPI waits yield the core: 8 busy-waiting ranks on 2 cores slowed
//                           the suite from about 1 s to up to 10 s at 2 ranks
//   --mca opal_common_ucx_opal_mem_hooks 0
//                           keeps oshmem's UCX layer from registering a memory hook that
//                           outlives its library and crashes Open MPI 4.1.4 at exit (the
//                           openshmem provider sets the same in its environment)
//   --mca odls_base_signal_direct_children_only 1
//                           signal each rank's process, not its process group: the launcher
//                           moves the ranks into the job's group (mpi_rank_shim.cpp)
// --tag-output is added by the launcher itself: it turns mpirun's "[1,R]<stdout>:" tags into
// "[rank R] ".
#pragma once

#include <array>

namespace aperture::launcher {

// The internal command the launching program answers as the rank shim (mpi_rank_shim.cpp).
inline constexpr const char* kMpiRankShim = "_mpi-rank";

inline constexpr std::array kMpirunFlags = {
    "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader",
    "--mca", "pml", "ob1", "--mca", "mpi_yield_when_idle", "1",
    "--mca", "opal_common_ucx_opal_mem_hooks", "0",
    "--mca", "odls_base_signal_direct_children_only", "1",
};

}  // namespace aperture::launcher
