// src/launcher/spawn.h — start one child the launcher's way: its own pipes, the job's process group,
// killed with the launcher, and nothing else inherited.
//
// Between fork and exec the child only makes system calls (the launcher has threads: the hub's),
// so every string it needs is prepared before fork. A failed exec is reported back through a
// close-on-exec pipe, so the caller learns "cannot exec" as an error instead of a rank that
// exits 127.
#pragma once

#include <sys/types.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace aperture::launcher {

class SignalWatch;

struct SpawnRequest {
  std::string path;                // what to execve (already resolved)
  std::vector<std::string> argv;   // argv[0] first
  std::vector<std::string> env;    // "NAME=value"
  pid_t process_group = 0;         // 0: lead a new group; else join this one
  bool inherit_stdin = false;      // else stdin is /dev/null
  const SignalWatch* signals = nullptr;  // the mask and SIGPIPE to restore before exec
};

struct SpawnedProcess {
  pid_t pid = -1;
  int stdout_fd = -1;  // read ends, close-on-exec
  int stderr_fd = -1;
};

// The exec itself failed (the child is already reaped); what() names the program and errno.
struct ExecError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws std::runtime_error when a pipe or fork fails, ExecError when exec fails.
SpawnedProcess spawn_process(const SpawnRequest& request);

// The current environment with every variable in `unset` and every name in `set` removed, then
// `set` appended.
std::vector<std::string> environment_with(const std::vector<std::pair<std::string, std::string>>& set,
                                          const std::vector<std::string>& unset = {});

}  // namespace aperture::launcher
