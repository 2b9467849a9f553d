// launcher/wait_status.h — how a finished process is described and what exit code it passes on.
#pragma once

#include <string>

namespace aperture::launcher {

// "exited with status 3" or "was killed by signal 9 (SIGKILL)", from a waitpid status.
std::string describe_wait_status(int status);
// True for a clean exit (status 0).
bool succeeded(int status);
// The code a launcher passes on for it: the exit status, or 128 + the signal number (the shell's
// convention), so `aperture launch` fails the way the failing rank did.
int exit_code_of(int status);
// "SIGKILL" for 9; "signal 64" for numbers without a name.
std::string signal_name(int signal_number);

}  // namespace aperture::launcher
