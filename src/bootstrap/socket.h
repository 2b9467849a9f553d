// src/bootstrap/socket.h — the stream sockets ranks and the hub talk over.
//
// Two transports: abstract Unix sockets for one machine (no file to leave behind; the peer's
// uid is checked with SO_PEERCRED since abstract names have no permissions), and TCP for
// torchrun and mpirun jobs. Every descriptor is close-on-exec.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace aperture::detail {

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  ~Fd();
  int get() const { return fd_; }
  int release();
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

struct Listener {
  Fd fd;
  std::string address;  // "unix:@name" or "tcp:host:port"
};

// Listens on a fresh abstract Unix socket with a random name.
Listener listen_unix();
// Listens on TCP host:port (port 0: any free one); `advertise_host` goes into the address.
Listener listen_tcp(const std::string& host, int port, const std::string& advertise_host);
// Connects to an address made by the functions above, retrying until `deadline` (the listener
// may not be up yet when a rank starts). Throws aperture::Error naming the address.
Fd connect_to(const std::string& address, std::chrono::steady_clock::time_point deadline);
// One try at the same, given up on at `deadline` (a TCP connection whose packets are dropped; a
// listener whose queue is full): the connected socket, or an empty Fd and why not in `why`
// (errno's text, or why a host name did not resolve). A malformed address throws: no later try
// can fix it.
Fd try_connect(const std::string& address, std::string& why, std::chrono::steady_clock::time_point deadline);

// Turns off Nagle's algorithm on TCP sockets (a no-op on Unix sockets): rendezvous messages
// are small and latency-bound.
void set_low_latency(int fd);

// True when the Unix-socket peer runs as our user (always true for TCP sockets).
bool peer_is_same_user(int fd);

// Whole-buffer I/O. Return false on end of file or a broken connection; never on EINTR.
bool write_all(int fd, const void* data, std::size_t bytes);
bool read_all(int fd, void* data, std::size_t bytes);
// How a bounded read ended.
enum class ReadEnd { complete, closed, deadline };
// Reads exactly `bytes`, waiting for each piece at most until `deadline`: a peer that stops
// sending in the middle of a message cannot hold the reader forever.
ReadEnd read_all_by(int fd, void* data, std::size_t bytes, std::chrono::steady_clock::time_point deadline);

// `bytes` random bytes from the kernel, as hex.
std::string make_random_hex(std::size_t bytes);

// Waits until fd is readable, at most `timeout`; true when readable (or closed).
bool wait_readable(int fd, std::chrono::milliseconds timeout);

}  // namespace aperture::detail
