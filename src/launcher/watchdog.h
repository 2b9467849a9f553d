// src/launcher/watchdog.h — the job's process group, and its death with the launcher.
//
// The launcher forks a small watchdog first. It leads a new process group, the job's group:
// every rank (or mpirun and its ranks) joins it, so one signal to the group reaches the whole
// job, and the group outlives any one rank. The watchdog holds the read end of a pipe; when the
// launcher dies without saying goodbye (even by SIGKILL, and even by a SIGKILL aimed at the
// launcher's own process group, as CI runners send on timeout) the pipe reaches end of file and
// the watchdog SIGKILLs the group. PR_SET_PDEATHSIG alone would kill the ranks but not what they
// started (a shell's children, say).
#pragma once

#include <sys/types.h>

namespace aperture::launcher {

class Watchdog {
 public:
  // Forks the watchdog. Without one (fork failed: a note says so) group() is 0 and the job
  // still runs, its first process leading the group.
  Watchdog();
  ~Watchdog();  // release()
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The job's process group, or 0 when there is no watchdog.
  pid_t group() const { return pid_ > 0 ? pid_ : 0; }
  // The job is over: the watchdog exits without killing anything, and is reaped.
  void release();

 private:
  pid_t pid_ = -1;
  int fd_ = -1;  // write end
};

}  // namespace aperture::launcher
