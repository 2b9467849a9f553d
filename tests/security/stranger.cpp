// stranger: what another user (or another job of the same user) can try against a job.
// It does not link aperture: it speaks the wire format (src/bootstrap/wire.h) by hand, as an
// attacker would. Each mode prints one line and exits 0 when the job kept it out, 1 when it
// got in, 2 on a usage or set-up error.
//
//   hello ADDRESS RANK WORLD TOKEN   connect to a hub and present a hello; kept out when the hub
//                                    closes without an answer or answers with a refusal
//   garbage ADDRESS                  connect and send bytes that are no hello; kept out when the
//                                    hub drops the connection
//   idle ADDRESS SECONDS             connect and say nothing for SECONDS (a slow stranger must
//                                    not hold up the job)
//   open PATH                        open a file read-write (a rank's heap through
//                                    /proc/PID/fd/N, /proc/PID/mem, /proc/PID/environ, ...);
//                                    kept out when the open fails
//   listen NAME SECONDS              listen on the abstract socket @NAME for SECONDS and report
//                                    what connecting ranks sent (a rank must send nothing, not
//                                    even its hello, to a hub of another user); exits 0 when
//                                    nothing arrived
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bootstrap/wire.h"

using namespace aperture::detail;

namespace {

int connect_address(const std::string& address) {
  if (address.rfind("unix:@", 0) == 0) {
    const std::string name = address.substr(6);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un target{};
    target.sun_family = AF_UNIX;
    std::memcpy(target.sun_path + 1, name.data(), std::min(name.size(), sizeof target.sun_path - 2));
    const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&target), length) != 0) {
      std::printf("kept out: connect(%s) failed: %s\n", address.c_str(), std::strerror(errno));
      std::exit(0);
    }
    return fd;
  }
  if (address.rfind("tcp:", 0) == 0) {
    const std::string rest = address.substr(4);
    const auto colon = rest.rfind(':');
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(rest.substr(0, colon).c_str(), rest.substr(colon + 1).c_str(), &hints, &found) != 0) {
      std::printf("set-up error: cannot resolve %s\n", address.c_str());
      std::exit(2);
    }
    const int fd = ::socket(found->ai_family, SOCK_STREAM, 0);
    const int rc = ::connect(fd, found->ai_addr, found->ai_addrlen);
    ::freeaddrinfo(found);
    if (rc != 0) {
      std::printf("set-up error: connect(%s) failed: %s\n", address.c_str(), std::strerror(errno));
      std::exit(2);
    }
    return fd;
  }
  std::printf("set-up error: bad address %s\n", address.c_str());
  std::exit(2);
}

// Reads until the peer closes or `seconds` pass; returns what arrived, and whether it closed.
std::string read_until_closed(int fd, double seconds, bool* closed) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  *closed = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return got;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) {
      *closed = true;
      return got;
    }
    got.append(buffer, static_cast<std::size_t>(n));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "hello" && argc == 6) {
    const int fd = connect_address(argv[2]);
    wire::Hello hello;
    hello.rank = std::atoi(argv[3]);
    hello.world_size = std::atoi(argv[4]);
    hello.pid = static_cast<std::int32_t>(::getpid());
    wire::set_field(hello.token, argv[5]);
    wire::set_field(hello.host, "stranger");
    if (::send(fd, &hello, sizeof hello, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof hello)) {
      std::printf("kept out: the hub closed the connection before the hello was sent\n");
      return 0;
    }
    bool closed = false;
    const std::string answer = read_until_closed(fd, 15, &closed);
    if (answer.size() < sizeof(wire::HelloReply)) {
      std::printf("kept out: the hub %s without an answer\n", closed ? "closed the connection" : "stayed silent");
      return 0;
    }
    wire::HelloReply reply;
    std::memcpy(&reply, answer.data(), sizeof reply);
    if (reply.status != 0) {
      std::printf("kept out: refused: %s\n", answer.substr(sizeof reply).c_str());
      return 0;
    }
    std::printf("GOT IN: the hub accepted a stranger's hello as rank %d\n", hello.rank);
    return 1;
  }
  if (mode == "garbage" && argc == 3) {
    const int fd = connect_address(argv[2]);
    std::string junk(sizeof(wire::Hello) * 3, '\0');
    for (std::size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>(i * 131 + 7);
    ::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
    bool closed = false;
    const std::string answer = read_until_closed(fd, 15, &closed);
    std::printf("%s: the hub %s after %zu bytes of garbage (%zu bytes answered)\n", closed ? "kept out" : "GOT IN",
                closed ? "dropped the connection" : "kept the connection", junk.size(), answer.size());
    return closed ? 0 : 1;
  }
  if (mode == "idle" && argc == 4) {
    const int fd = connect_address(argv[2]);
    bool closed = false;
    read_until_closed(fd, std::atof(argv[3]), &closed);
    std::printf("kept out: idled %s s %s\n", argv[3], closed ? "(the hub dropped us)" : "without saying a word");
    return 0;
  }
  if (mode == "open" && argc == 3) {
    const int fd = ::open(argv[2], O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      std::printf("GOT IN: opened %s read-write\n", argv[2]);
      return 1;
    }
    const int read_only = ::open(argv[2], O_RDONLY | O_CLOEXEC);
    if (read_only >= 0) {
      std::printf("GOT IN: opened %s read-only\n", argv[2]);
      return 1;
    }
    std::printf("kept out: open(%s): %s\n", argv[2], std::strerror(errno));
    return 0;
  }
  if (mode == "listen" && argc == 4) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    const std::string name = argv[2];
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path + 1, name.data(), std::min(name.size(), sizeof address.sun_path - 2));
    const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || ::listen(fd, 16) != 0) {
      std::printf("set-up error: cannot listen on @%s: %s\n", name.c_str(), std::strerror(errno));
      return 2;
    }
    std::printf("listening on @%s\n", name.c_str());
    std::size_t received = 0;
    int connections = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::atof(argv[3]));
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int peer = ::accept(fd, nullptr, nullptr);
      if (peer < 0) continue;
      ++connections;
      bool closed = false;
      received += read_until_closed(peer, 2, &closed).size();
      ::close(peer);
    }
    std::printf("%s: %d connection(s), %zu bytes received\n", received == 0 ? "kept out" : "GOT IN", connections,
                received);
    return received == 0 ? 0 : 1;
  }
  std::fprintf(stderr, "usage: stranger hello ADDRESS RANK WORLD TOKEN | garbage ADDRESS | idle ADDRESS SECONDS | "
                       "open PATH | listen NAME SECONDS\n");
  return 2;
}
