// src/launcher/signals.cpp — the launcher's signals as poll()-able events.
#include "signals.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace aperture::launcher {

SignalWatch::SignalWatch() {
  sigset_t watched;
  sigemptyset(&watched);
  for (const int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&watched, sig);
  if (::pthread_sigmask(SIG_BLOCK, &watched, &original_mask_) != 0)
    throw std::runtime_error("pthread_sigmask failed");
  fd_ = ::signalfd(-1, &watched, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) {
    const int error = errno;
    ::pthread_sigmask(SIG_SETMASK, &original_mask_, nullptr);
    throw std::runtime_error(std::string("signalfd failed: ") + std::strerror(error));
  }
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &original_sigpipe_);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  ::sigaction(SIGCHLD, &default_action, &original_sigchld_);
}

SignalWatch::~SignalWatch() {
  ::close(fd_);
  ::sigaction(SIGPIPE, &original_sigpipe_, nullptr);
  ::sigaction(SIGCHLD, &original_sigchld_, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &original_mask_, nullptr);
}

std::vector<int> SignalWatch::take() {
  std::vector<int> arrived;
  signalfd_siginfo info[16];
  for (;;) {
    const ssize_t n = ::read(fd_, info, sizeof info);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (std::size_t i = 0; i < static_cast<std::size_t>(n) / sizeof info[0]; ++i)
      arrived.push_back(static_cast<int>(info[i].ssi_signo));
  }
  return arrived;
}

void SignalWatch::restore_in_child() const {
  ::sigaction(SIGPIPE, &original_sigpipe_, nullptr);
  ::sigaction(SIGCHLD, &original_sigchld_, nullptr);
  ::sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
}

}  // namespace aperture::launcher
