// tools/commands.h — the subcommands of the `aperture` program; each takes argv from its own
// name on and returns the exit code.
#pragma once

namespace aperture::cli {

int launch_main(int argc, char** argv);  // launch.cpp
int info_main(int argc, char** argv);    // info.cpp
int demo_main(int argc, char** argv);    // demo.cpp
int mpi_rank_main(int argc, char** argv);  // mpi_rank_shim.cpp (internal: `_mpi-rank`)

}  // namespace aperture::cli
