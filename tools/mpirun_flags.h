// tools/mpirun_flags.h — the one list of flags `aperture launch --mpi` gives Open MPI's mpirun.
//
// mpirun -n N <kMpirunFlags...> --tag-output PROGRAM ARGS...
//   --oversubscribe         more ranks than cores is normal here (tests run 8 ranks on 2 cores)
//   --bind-to none          bound ranks on an oversubscribed machine would share one core
//   --mca btl self,vader    shared memory and self only: the ranks are all on this machine
//   --mca odls_base_signal_direct_children_only 1
//                           signal each rank's process, not its process group: the launcher
//                           moves the ranks into the job's group (mpi_rank_shim.cpp)
// --tag-output is added by the launcher itself: it turns mpirun's "[1,R]<stdout>:" tags into
// "[rank R] ".
#pragma once

#include <array>

namespace aperture::cli {

inline constexpr std::array kMpirunFlags = {
    "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader",
    "--mca", "odls_base_signal_direct_children_only", "1",
};

}  // namespace aperture::cli
