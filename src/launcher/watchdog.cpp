// src/launcher/watchdog.cpp — lead the job's process group; kill it if the launcher dies.
#include "watchdog.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "launch_modes.h"

namespace aperture::launcher {

namespace {

// The watchdog's whole life: system calls only (the launcher may already have threads). Its
// signal mask is the launcher's (SIGINT, SIGTERM, SIGHUP blocked), so stopping the job with
// SIGTERM to the group leaves it standing; only SIGKILL ends it early.
[[noreturn]] void watch(int fd) {
  ::setpgid(0, 0);
  // Hold nothing of the launcher's: an open stdout pipe would keep its reader waiting.
  if (fd > 0) ::close_range(0, static_cast<unsigned>(fd) - 1, 0);
  ::close_range(static_cast<unsigned>(fd) + 1, ~0U, 0);
  char goodbye = 0;
  ssize_t n;
  do {
    n = ::read(fd, &goodbye, 1);
  } while (n < 0 && errno == EINTR);
  if (n == 0) ::kill(0, SIGKILL);  // end of file without goodbye: the launcher died; so do we all
  ::_exit(0);
}

}  // namespace

Watchdog::Watchdog() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    launch_note(std::string("no watchdog (pipe2: ") + std::strerror(errno) + "); the job runs without one");
    return;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[1]);
    watch(fds[0]);
  }
  ::close(fds[0]);
  if (pid < 0) {
    launch_note(std::string("no watchdog (fork: ") + std::strerror(errno) + "); the job runs without one");
    ::close(fds[1]);
    return;
  }
  ::setpgid(pid, pid);  // from this side too, so the group exists before the first rank joins it
  pid_ = pid;
  fd_ = fds[1];
}

Watchdog::~Watchdog() { release(); }

void Watchdog::release() {
  if (fd_ < 0) return;
  const char goodbye = 1;
  [[maybe_unused]] ssize_t n = ::write(fd_, &goodbye, 1);
  ::close(fd_);
  fd_ = -1;
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace aperture::launcher
