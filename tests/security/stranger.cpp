// stranger: what another user (or another job of the same user) can try against a job.
// It does not link aperture: it speaks the wire format (src/bootstrap/wire.h) by hand, as an
// attacker would. Each mode prints one line and exits 0 when the job kept it out, 1 when it
// got in (or nothing proved it was kept out), 2 on a usage or set-up error. "Kept out" is said
// only for the reason under test: a refusal or a dropped connection from the hub, an open that
// fails with EACCES or EPERM. A connect that fails, a hub that stays silent or an open that fails
// for another reason (ENOENT: a wrong path) proves nothing, and is not counted as kept out.
//
//   hello ADDRESS RANK WORLD TOKEN   connect to a hub and go through the handshake with TOKEN (a
//                                    hello, then a proof of TOKEN for the hub's challenge); kept
//                                    out when the hub closes without an answer or refuses
//   garbage ADDRESS                  connect and send bytes that are no hello; kept out when the
//                                    hub drops the connection
//   idle ADDRESS SECONDS [DROP_BY]   connect and say nothing for SECONDS (a slow stranger must
//                                    not hold up the job); with DROP_BY, exits 0 only when the
//                                    hub dropped the connection after at least SECONDS and before
//                                    DROP_BY seconds (the hub's idle limit observed)
//   open PATH                        open a file read-write (a rank's heap through
//                                    /proc/PID/fd/N, /proc/PID/mem, /proc/PID/environ, ...);
//                                    kept out when the open fails with EACCES or EPERM
//   owner-open PATH                  the control of `open`: exits 0 when PATH opens (run as the
//                                    owner, it shows the path is right, so a refusal is the
//                                    kernel's permission check)
//   fake-hub ADDRESS SECONDS GUESS REAL   listen on ADDRESS (unix:@NAME or tcp:HOST:PORT) as a
//                                    hub of the same user that does not know the job's token:
//                                    answer each rank's hello with a proof made with GUESS; exits
//                                    0 when a rank came, sent nothing after its hello, and the
//                                    REAL token was in nothing it sent
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

#include "bootstrap/job_proof.h"
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
      std::printf("set-up error: connect(%s) failed: %s (proves nothing about the hub)\n", address.c_str(),
                  std::strerror(errno));
      std::exit(2);
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

// Reads `bytes` bytes, or less when the peer closes or `seconds` pass first.
std::string read_exactly(int fd, std::size_t bytes, double seconds, bool* closed) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  *closed = false;
  while (got.size() < bytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return got;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::recv(fd, buffer, std::min(sizeof buffer, bytes - got.size()), 0);
    if (n <= 0) {
      *closed = true;
      return got;
    }
    got.append(buffer, static_cast<std::size_t>(n));
  }
  return got;
}

// Listens on "unix:@NAME" or "tcp:HOST:PORT"; -1 on failure.
int listen_address(const std::string& address) {
  if (address.rfind("unix:@", 0) == 0) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    const std::string name = address.substr(6);
    sockaddr_un local{};
    local.sun_family = AF_UNIX;
    std::memcpy(local.sun_path + 1, name.data(), std::min(name.size(), sizeof local.sun_path - 2));
    const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (::bind(fd, reinterpret_cast<sockaddr*>(&local), length) != 0 || ::listen(fd, 16) != 0) return -1;
    return fd;
  }
  if (address.rfind("tcp:", 0) == 0) {
    const std::string rest = address.substr(4);
    const auto colon = rest.rfind(':');
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    local.sin_port = htons(static_cast<std::uint16_t>(std::atoi(rest.substr(colon + 1).c_str())));
    if (::inet_pton(AF_INET, rest.substr(0, colon).c_str(), &local.sin_addr) != 1) return -1;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 || ::listen(fd, 16) != 0) return -1;
    return fd;
  }
  return -1;
}

// A hub that does not know the token: it answers every hello with a proof made with `guess`, and
// records what each rank sends after its hello (a rank must send nothing: no proof, no request).
int fake_hub(const std::string& address, double seconds, const std::string& guess, const std::string& real) {
  const int fd = listen_address(address);
  if (fd < 0) {
    std::printf("set-up error: cannot listen on %s: %s\n", address.c_str(), std::strerror(errno));
    return 2;
  }
  std::printf("listening on %s\n", address.c_str());
  int hellos = 0;
  std::size_t after_hello = 0;
  bool token_seen = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int peer = ::accept(fd, nullptr, nullptr);
    if (peer < 0) continue;
    bool closed = false;
    const std::string got = read_exactly(peer, sizeof(wire::Hello), 5, &closed);
    token_seen = token_seen || got.find(real) != std::string::npos;
    if (got.size() == sizeof(wire::Hello)) {
      ++hellos;
      wire::Hello hello;
      std::memcpy(&hello, got.data(), sizeof hello);
      wire::HubHello answer;
      answer.challenge = make_challenge();
      answer.proof = job_proof(Prover::hub, guess, hello.challenge, answer.challenge, hello.rank, hello.world_size);
      ::send(peer, &answer, sizeof answer, MSG_NOSIGNAL);
      const std::string rest = read_until_closed(peer, 5, &closed);
      after_hello += rest.size();
      token_seen = token_seen || rest.find(real) != std::string::npos;
    }
    ::close(peer);
  }
  const bool kept_out = hellos > 0 && after_hello == 0 && !token_seen;
  std::printf("%s: %d hello(s), %zu bytes after them, the job's token %s\n", kept_out ? "kept out" : "GOT IN", hellos,
              after_hello, token_seen ? "SEEN" : "never seen");
  return kept_out ? 0 : 1;
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
    hello.challenge = make_challenge();
    wire::set_field(hello.host, "stranger");
    if (::send(fd, &hello, sizeof hello, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof hello)) {
      std::printf("kept out: the hub closed the connection before the hello was sent\n");
      return 0;
    }
    wire::HubHello hub_hello;
    bool closed = false;
    const std::string first = read_exactly(fd, sizeof hub_hello, 15, &closed);
    if (first.size() < sizeof hub_hello) {
      if (!closed) {
        std::printf("NOT PROVEN: the hub stayed silent for 15 s after the hello (neither refused nor dropped)\n");
        return 1;
      }
      std::printf("kept out: the hub closed the connection without answering the hello\n");
      return 0;
    }
    std::memcpy(&hub_hello, first.data(), sizeof hub_hello);
    if (hub_hello.status != 0) {
      std::printf("kept out: refused at the hello: %s\n", read_until_closed(fd, 15, &closed).c_str());
      return 0;
    }
    wire::RankProof proof;
    proof.proof = job_proof(Prover::rank, argv[5], hello.challenge, hub_hello.challenge, hello.rank, hello.world_size);
    if (::send(fd, &proof, sizeof proof, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof proof)) {
      std::printf("kept out: the hub closed the connection before the proof was sent\n");
      return 0;
    }
    const std::string answer = read_until_closed(fd, 15, &closed);
    if (answer.size() < sizeof(wire::HelloReply)) {
      if (!closed) {
        std::printf("NOT PROVEN: the hub stayed silent for 15 s after the proof (neither refused nor dropped)\n");
        return 1;
      }
      std::printf("kept out: the hub closed the connection without answering the proof\n");
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
  if (mode == "idle" && (argc == 4 || argc == 5)) {
    const int fd = connect_address(argv[2]);
    const auto start = std::chrono::steady_clock::now();
    const double at_least = std::atof(argv[3]);
    bool closed = false;
    read_until_closed(fd, argc == 5 ? std::atof(argv[4]) : at_least, &closed);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (argc == 4) {
      std::printf("idled %.1f s %s\n", seconds, closed ? "(the hub dropped us)" : "without saying a word");
      return 0;
    }
    const bool dropped_in_time = closed && seconds >= at_least;
    std::printf("%s: the hub %s after %.1f s of silence (expected between %s and %s s)\n",
                dropped_in_time ? "kept out" : "NOT PROVEN", closed ? "dropped the connection" : "kept the connection",
                seconds, argv[3], argv[4]);
    return dropped_in_time ? 0 : 1;
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
    const int error = errno;
    if (error != EACCES && error != EPERM) {
      std::printf("set-up error: open(%s): %s, which is no permission check (is the path right?)\n", argv[2],
                  std::strerror(error));
      return 2;
    }
    std::printf("kept out: open(%s): %s\n", argv[2], std::strerror(error));
    return 0;
  }
  if (mode == "owner-open" && argc == 3) {
    int fd = ::open(argv[2], O_RDWR | O_CLOEXEC);
    if (fd < 0) fd = ::open(argv[2], O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      std::printf("control failed: the owner cannot open %s either: %s\n", argv[2], std::strerror(errno));
      return 1;
    }
    ::close(fd);
    std::printf("control: the owner opens %s\n", argv[2]);
    return 0;
  }
  if (mode == "fake-hub" && argc == 6) return fake_hub(argv[2], std::atof(argv[3]), argv[4], argv[5]);
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
  std::fprintf(stderr, "usage: stranger hello ADDRESS RANK WORLD TOKEN | garbage ADDRESS | idle ADDRESS SECONDS "
                       "[DROP_BY] | open PATH | owner-open PATH | listen NAME SECONDS | fake-hub ADDRESS SECONDS "
                       "GUESS REAL\n");
  return 2;
}
