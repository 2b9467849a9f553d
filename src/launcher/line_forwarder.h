// src/launcher/line_forwarder.h — a rank's output, read from a pipe and passed on one line at a time.
//
// Ranks write to pipes; the launcher reads whatever is there when poll() says so and hands each
// complete line to a handler (which adds "[rank R] " and writes it out). Whole lines go out in
// one write() so the lines of different ranks never interleave mid-line. A last line without a
// newline is passed on when the pipe closes; a line longer than kMaxLine is passed on in pieces
// so one rank cannot make the launcher hold unbounded memory.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace aperture::launcher {

// Where forwarded output goes (the launcher's stdout or stderr). Once a write fails (say the
// reader of a pipe went away: EPIPE) the sink drops what follows instead of failing the job.
class OutputSink {
 public:
  explicit OutputSink(int fd) : fd_(fd) {}
  void write_all(std::string_view bytes);
  int fd() const { return fd_; }

 private:
  int fd_;
  bool broken_ = false;
};

class LineForwarder {
 public:
  using LineHandler = std::function<void(std::string_view line)>;  // the line, without its '\n'
  static constexpr std::size_t kMaxLine = 64 * 1024;

  LineForwarder(int fd, LineHandler handler);  // takes ownership of fd (made non-blocking here)
  ~LineForwarder();
  LineForwarder(LineForwarder&& other) noexcept;
  LineForwarder& operator=(LineForwarder&&) = delete;
  LineForwarder(const LineForwarder&) = delete;

  int fd() const { return fd_; }
  bool is_open() const { return fd_ >= 0; }
  // Reads what the pipe holds now without blocking and passes on the complete lines. At end of
  // file passes on the partial last line and closes the pipe.
  void read_available() { read_rounds(4); }
  // Reads until the pipe is empty for now (or closed), e.g. once its rank has exited.
  void drain() { read_rounds(1 << 30); }
  // Passes on a partial last line and closes the pipe (when whatever still holds its write end
  // is not going to finish it).
  void close();

 private:
  void read_rounds(int max_rounds);
  void emit_lines();

  int fd_ = -1;
  LineHandler handler_;
  std::string pending_;
};

// A handler that writes "<prefix><line>\n" to `sink`.
LineForwarder::LineHandler prefixed_lines(OutputSink& sink, std::string prefix);

}  // namespace aperture::launcher
