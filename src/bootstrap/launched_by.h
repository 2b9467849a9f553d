// src/bootstrap/launched_by.h — who started this process, decided in one place.
//
// Each launcher marks its ranks with its own variables: `aperture launch` with APERTURE_RANK and
// APERTURE_WORLD_SIZE, Open MPI's mpirun/oshrun with OMPI_COMM_WORLD_RANK/SIZE, torchrun with
// RANK and WORLD_SIZE, Slurm's srun with SLURM_PROCID and SLURM_STEP_NUM_TASKS. Team::from_env,
// the providers that need MPI, the tools and the tests ask here instead of looking for those
// variables themselves. Whether the values are well-formed
// is bootstrap/launcher_variables.h's business; this only says whose they are.
#pragma once

#include <cstdlib>
#include <string_view>

#include "aperture/team.h"
#include "common/env.h"

namespace aperture::detail {

enum class LaunchedBy {
  aperture,  // `aperture launch`
  mpirun,    // Open MPI's mpirun or oshrun
  torchrun,  // torchrun (torch.distributed.run)
  srun,      // Slurm's srun, a process per task (not mpirun inside an allocation: that is mpirun)
  single,    // none: a process on its own
};

// Is `launcher`'s mark on this environment? More than one can be: a program started by mpirun
// under `aperture launch` carries both. srun's mark is a step of more than one task: a step of
// one (`srun --pty bash`, where a user runs `aperture launch`) is a process on its own.
bool has_launcher_variables(LaunchedBy launcher, const env::Lookup& env);

// The launcher Team::from_env follows: the first marked of aperture, mpirun, torchrun, srun
// (torchrun started by srun, one per node, marks both: its workers are torchrun's); single when
// none is.
LaunchedBy detect_launched_by(const env::Lookup& env);

// The name Team::launched_by() reports: "aperture launch", "mpi", "torchrun", "srun" or "single".
std::string_view launched_by_name(LaunchedBy launcher);

// Who started `team`'s ranks (its Team::launched_by(), as a LaunchedBy).
LaunchedBy launched_by(const Team& team);

// The names of the two launchers MPI can know (launched_by_name's).
inline constexpr std::string_view kMpirunName = "mpi";
inline constexpr std::string_view kSrunName = "srun";

// Whether MPI knows every rank of the job: mpirun started them, or srun did and serves PMIx
// (`srun --mpi=pmix`: PMIX_RANK set), through which MPI_Init learns the job. What the MPI-based
// providers, engines and the collectives between nodes need. The team's form asks of the
// launcher that formed it and of this process's environment; it is inline, by the team's name,
// because the collectives' library asks too and sees only the public Team.
bool mpi_knows_the_ranks(const env::Lookup& env);
inline bool mpi_knows_the_ranks(const Team& team) {
  const std::string_view by = team.launched_by();
  return by == kMpirunName || (by == kSrunName && std::getenv("PMIX_RANK") != nullptr);
}

}  // namespace aperture::detail
