// src/launcher/line_forwarder.cpp — a rank's output passed on one line at a time.
#include "line_forwarder.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace aperture::launcher {

void OutputSink::write_all(std::string_view bytes) {
  while (!broken_ && !bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      // Our stdout may have come to us non-blocking; wait until it takes more.
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, -1);
    } else {
      broken_ = true;  // EPIPE and friends: nobody reads this any more
    }
  }
}

LineForwarder::LineForwarder(int fd, LineHandler handler) : fd_(fd), handler_(std::move(handler)) {
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
}

LineForwarder::~LineForwarder() {
  if (fd_ >= 0) ::close(fd_);
}

LineForwarder::LineForwarder(LineForwarder&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), handler_(std::move(other.handler_)), pending_(std::move(other.pending_)) {}

void LineForwarder::emit_lines() {
  std::size_t start = 0;
  for (;;) {
    const std::size_t newline = pending_.find('\n', start);
    if (newline == std::string::npos) break;
    handler_(std::string_view(pending_).substr(start, newline - start));
    start = newline + 1;
  }
  pending_.erase(0, start);
  while (pending_.size() >= kMaxLine) {
    handler_(std::string_view(pending_).substr(0, kMaxLine));
    pending_.erase(0, kMaxLine);
  }
}

void LineForwarder::read_rounds(int max_rounds) {
  if (fd_ < 0) return;
  char buffer[64 * 1024];
  // In the poll loop, a few reads at most and back to poll(): one chatty rank must not starve
  // the others.
  for (int round = 0; round < max_rounds; ++round) {
    const ssize_t n = ::read(fd_, buffer, sizeof buffer);
    if (n > 0) {
      pending_.append(buffer, static_cast<std::size_t>(n));
      emit_lines();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    close();  // end of file, or an error that ends this pipe just the same
    return;
  }
}

void LineForwarder::close() {
  if (fd_ < 0) return;
  if (!pending_.empty()) {
    handler_(pending_);
    pending_.clear();
  }
  ::close(fd_);
  fd_ = -1;
}

LineForwarder::LineHandler prefixed_lines(OutputSink& sink, std::string prefix) {
  return [&sink, prefix = std::move(prefix)](std::string_view line) {
    std::string out;
    out.reserve(prefix.size() + line.size() + 1);
    out.append(prefix).append(line).push_back('\n');
    sink.write_all(out);
  };
}

}  // namespace aperture::launcher
