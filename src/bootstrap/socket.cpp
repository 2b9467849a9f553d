#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "aperture/error.h"
#include "bootstrap/retry.h"
#include "common/format.h"

namespace aperture::detail {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

int Fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

namespace {

std::string errno_text(int error) { return detail::format("{} ({})", std::strerror(error), error); }

sockaddr_un abstract_address(const std::string& name, socklen_t* length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  // An abstract name starts with a NUL byte and lives only as long as the listening socket.
  address.sun_path[0] = '\0';
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return address;
}

std::string random_hex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0 && errno != EINTR) throw Error(ErrorCode::system, "getrandom failed: " + errno_text(errno), "getrandom");
    if (n > 0) got += static_cast<std::size_t>(n);
  }
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : raw) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return hex;
}

// Splits "host:port" at the last colon; throws on a malformed address.
std::pair<std::string, std::string> split_host_port(const std::string& text, const std::string& whole) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw Error(ErrorCode::invalid_argument,
                detail::format("malformed hub address '{}': expected unix:@name or tcp:host:port", whole));
  return {text.substr(0, colon), text.substr(colon + 1)};
}

}  // namespace

std::string make_random_hex(std::size_t bytes) { return random_hex(bytes); }

Listener listen_unix() {
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw Error(ErrorCode::system, "socket(AF_UNIX) failed: " + errno_text(errno), "socket");
  const std::string name = "aperture-" + random_hex(12);
  socklen_t length = 0;
  const sockaddr_un address = abstract_address(name, &length);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0)
    throw Error(ErrorCode::system, detail::format("bind(abstract unix socket @{}) failed: {}", name, errno_text(errno)),
                "bind");
  if (::listen(fd.get(), 1024) != 0)
    throw Error(ErrorCode::system, "listen(unix) failed: " + errno_text(errno), "listen");
  return Listener{std::move(fd), "unix:@" + name};
}

Listener listen_tcp(const std::string& host, int port, const std::string& advertise_host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found); rc != 0)
    throw Error(ErrorCode::invalid_argument,
                detail::format("cannot resolve '{}' to listen on: {}; check MASTER_ADDR", host, ::gai_strerror(rc)),
                "getaddrinfo");
  std::string last_error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd) continue;
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 1024) != 0) {
      last_error = errno_text(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &length);
    const int bound_port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                             : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    ::freeaddrinfo(found);
    return Listener{std::move(fd), detail::format("tcp:{}:{}", advertise_host, bound_port)};
  }
  ::freeaddrinfo(found);
  throw Error(ErrorCode::system,
              detail::format("cannot listen on {}:{}: {}; another process holds that port", host, port,
                             last_error),
              "bind");
}

namespace {

// connect(), given up on at `deadline`: a blocking TCP connect whose SYN is dropped (a firewall on
// the way, or a listener whose accept queue is full) would wait out the kernel's retries, about two
// minutes on Linux, and a blocking Unix-socket connect to a full queue would wait until the
// listener accepts, whatever APERTURE_TIMEOUT says. False with the reason in `why` (the caller
// retries until its deadline).
bool connect_by(int fd, const sockaddr* address, socklen_t length, std::chrono::steady_clock::time_point deadline,
                std::string& why) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    why = errno_text(errno);
    return false;
  }
  if (::connect(fd, address, length) != 0) {
    if (errno == EAGAIN) {  // a Unix socket's: it never waits
      why = "the listener's queue of connections is full (it accepts none)";
      return false;
    }
    if (errno != EINPROGRESS) {
      why = errno_text(errno);
      return false;
    }
    pollfd p{fd, POLLOUT, 0};
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      const int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1LL << 30))) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) {
        why = "no answer to the connection in time (its packets dropped: a firewall on the way, or a listener that "
              "accepts no more)";
        return false;
      }
      break;
    }
    int error = 0;
    socklen_t size = sizeof error;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) error = errno;
    if (error != 0) {
      why = errno_text(error);
      return false;
    }
  }
  ::fcntl(fd, F_SETFL, flags);  // the rest of the protocol uses blocking I/O with its own bounds
  return true;
}

}  // namespace

Fd try_connect(const std::string& address, std::string& why, std::chrono::steady_clock::time_point deadline) {
  if (address.rfind("unix:@", 0) == 0) {
    Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) throw Error(ErrorCode::system, "socket(AF_UNIX) failed: " + errno_text(errno), "socket");
    const std::string name = address.substr(6);
    if (name.empty() || name.size() > sizeof(sockaddr_un::sun_path) - 1)
      throw Error(ErrorCode::invalid_argument,
                  detail::format("malformed hub address '{}': the socket name is empty or too long", address));
    socklen_t length = 0;
    const sockaddr_un target = abstract_address(name, &length);
    if (connect_by(fd.get(), reinterpret_cast<const sockaddr*>(&target), length, deadline, why)) return fd;
  } else if (address.rfind("tcp:", 0) == 0) {
    const auto [host, port] = split_host_port(address.substr(4), address);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
      why = detail::format("cannot resolve host '{}': {}", host, ::gai_strerror(rc));
    } else {
      for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
        Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
        if (!fd) continue;
        if (connect_by(fd.get(), a->ai_addr, a->ai_addrlen, deadline, why)) {
          set_low_latency(fd.get());
          ::freeaddrinfo(found);
          return fd;
        }
      }
      ::freeaddrinfo(found);
    }
  } else {
    throw Error(ErrorCode::invalid_argument,
                detail::format("malformed hub address '{}': expected unix:@name or tcp:host:port", address));
  }
  return Fd();
}

Fd connect_to(const std::string& address, std::chrono::steady_clock::time_point deadline) {
  Fd fd;
  std::string last_error;
  const bool done = retry_until(deadline, std::chrono::milliseconds(2), std::chrono::milliseconds(256), [&] {
    fd = try_connect(address, last_error, deadline);
    return fd ? Try::done : Try::again;
  });
  if (!done)
    throw Error(ErrorCode::peer_lost,
                detail::format("cannot reach the rendezvous hub at {}: {}; is rank 0 (or the launcher) running, and "
                               "are MASTER_ADDR/MASTER_PORT right?",
                               address, last_error));
  return fd;
}

void set_low_latency(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // fails harmlessly on Unix sockets
}

bool peer_is_same_user(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return false;
  if (address.ss_family != AF_UNIX) return true;
  ucred credentials{};
  socklen_t size = sizeof credentials;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) return false;
  return credentials.uid == ::geteuid();
}

bool write_all(int fd, const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

bool read_all(int fd, void* data, std::size_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::recv(fd, p, bytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

ReadEnd read_all_by(int fd, void* data, std::size_t bytes, std::chrono::steady_clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !wait_readable(fd, left)) return ReadEnd::deadline;
    const ssize_t n = ::recv(fd, p, bytes, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return ReadEnd::closed;
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return ReadEnd::complete;
}

bool wait_readable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  for (;;) {
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(timeout.count(), 1LL << 30)));
    if (rc < 0 && errno == EINTR) continue;
    return rc > 0;
  }
}

}  // namespace aperture::detail
