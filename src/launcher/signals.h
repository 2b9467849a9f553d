// src/launcher/signals.h — the launcher's signals, as readable events in its poll loop.
//
// SIGCHLD (a rank ended) and SIGINT/SIGTERM/SIGHUP (stop the job) are blocked and read from a
// signalfd, so the loop sleeps in poll() and there is no async handler to get wrong. Create the
// SignalWatch before starting any thread (the hub's): threads inherit the blocked mask, so no
// thread takes these signals the default way. SIGPIPE is ignored: a closed stdout must not kill
// the launcher while ranks still run. SIGCHLD gets its default action (an ignored SIGCHLD,
// inherited from our parent, would have the kernel reap the ranks before we learn how they
// ended). Children get the original mask and actions back before exec.
#pragma once

#include <signal.h>

#include <vector>

namespace aperture::launcher {

class SignalWatch {
 public:
  SignalWatch();
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  int fd() const { return fd_; }
  // The signals that arrived since the last call (without blocking).
  std::vector<int> take();

  // What a child restores between fork and exec (async-signal-safe: two system calls).
  void restore_in_child() const;

 private:
  int fd_ = -1;
  sigset_t original_mask_{};
  struct sigaction original_sigpipe_ {};
  struct sigaction original_sigchld_ {};
};

}  // namespace aperture::launcher
