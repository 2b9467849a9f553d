// src/launcher/launch_modes.h — the two ways launch() starts a job, and the launcher's notes.
#pragma once

#include <string>

#include "launcher/launch.h"

namespace aperture::launcher {

int run_local_launch(const LaunchOptions& options);  // launch_local.cpp: our hub, forked ranks
int run_mpi_launch(const LaunchOptions& options);    // launch_mpi.cpp: through mpirun

// "aperture launch: " + message + "\n" on stderr, in one write.
void launch_note(const std::string& message);

}  // namespace aperture::launcher
