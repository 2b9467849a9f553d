// src/launcher/wait_status.cpp — how a finished process is described.
#include "launcher/wait_status.h"

#include <sys/wait.h>

#include <cstring>

namespace aperture::launcher {

std::string signal_name(int signal_number) {
  const char* abbreviation = ::sigabbrev_np(signal_number);  // "KILL"; null for unnamed numbers
  return abbreviation != nullptr ? std::string("SIG") + abbreviation : "signal " + std::to_string(signal_number);
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    std::string text = "was killed by signal " + std::to_string(sig) + " (" + signal_name(sig) + ")";
    if (WCOREDUMP(status)) text += ", core dumped";
    return text;
  }
  return "ended with wait status " + std::to_string(status);
}

bool succeeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace aperture::launcher
