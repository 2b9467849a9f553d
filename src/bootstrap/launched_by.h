// src/bootstrap/launched_by.h — who started this process, decided in one place.
//
// Each launcher marks its ranks with its own variables: `aperture launch` with APERTURE_RANK and
// APERTURE_WORLD_SIZE, Open MPI's mpirun/oshrun with OMPI_COMM_WORLD_RANK/SIZE, torchrun with
// RANK and WORLD_SIZE. Team::from_env, the providers that need mpirun, the tools and the tests
// ask here instead of looking for those variables themselves. Whether the values are well-formed
// is bootstrap/launcher_variables.h's business; this only says whose they are.
#pragma once

#include <string_view>

#include "common/env.h"

namespace aperture {
class Team;
}

namespace aperture::detail {

enum class LaunchedBy {
  aperture,  // `aperture launch`
  mpirun,    // Open MPI's mpirun or oshrun
  torchrun,  // torchrun (torch.distributed.run)
  single,    // none: a process on its own
};

// Is `launcher`'s mark on this environment? More than one can be: a program started by mpirun
// under `aperture launch` carries both.
bool has_launcher_variables(LaunchedBy launcher, const env::Lookup& env);

// The launcher Team::from_env follows: the first marked of aperture, mpirun, torchrun; single
// when none is.
LaunchedBy detect_launched_by(const env::Lookup& env);

// The name Team::launched_by() reports: "aperture launch", "mpi", "torchrun" or "single".
std::string_view launched_by_name(LaunchedBy launcher);

// Who started `team`'s ranks (its Team::launched_by(), as a LaunchedBy).
LaunchedBy launched_by(const Team& team);

}  // namespace aperture::detail
