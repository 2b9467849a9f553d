#include "bootstrap/fd_passing.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <vector>

#include "aperture/error.h"
#include "bootstrap/retry.h"
#include "common/format.h"

namespace aperture::detail {

namespace {

constexpr char kMagic[8] = {'A', 'P', 'F', 'D', 'v', '1', 0, 0};
constexpr std::size_t kTokenBytes = 16;  // 32 hex digits

// What travels with every descriptor. The token is the receiver's: only a process that learnt
// the receiver's Address (through the team) knows it.
struct Wire {
  char magic[8];
  char token[40];
  std::uint64_t tag;
};
static_assert(std::is_trivially_copyable_v<Wire>);

std::string errno_text(int error) { return format("{} (errno {})", std::strerror(error), error); }

std::chrono::milliseconds left_until(FdMailbox::Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(0));
}

sockaddr_un abstract_address(const char* name, socklen_t* length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::size_t size = ::strnlen(name, sizeof address.sun_path - 1);
  address.sun_path[0] = '\0';  // abstract: no file
  std::memcpy(address.sun_path + 1, name, size);
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + size);
  return address;
}

// Reads sizeof(Wire) bytes and whatever descriptors come with them, waiting at most until
// `deadline`. Returns "" or why the connection is to be dropped; `fds` holds every descriptor
// received either way (the caller closes what it does not keep).
std::string read_wire(int connection, Wire& wire, std::vector<Fd>& fds, FdMailbox::Deadline deadline) {
  auto* bytes = reinterpret_cast<char*>(&wire);
  std::size_t got = 0;
  while (got < sizeof wire) {
    if (!wait_readable(connection, left_until(deadline))) return "it sent nothing in time";
    iovec io{bytes + got, sizeof wire - got};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msghdr message{};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(connection, &message, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "recvmsg failed: " + errno_text(errno);
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.emplace_back(fd);
      }
    }
    if ((message.msg_flags & MSG_CTRUNC) != 0) return "it sent more descriptors than one message may carry";
    if (n == 0) return format("it closed the connection after {} of {} bytes", got, sizeof wire);
    got += static_cast<std::size_t>(n);
  }
  return {};
}

}  // namespace

FdMailbox::FdMailbox() {
  Listener listener = listen_unix();
  const std::string prefix = "unix:@";
  const std::string name = listener.address.substr(prefix.size());
  if (listener.address.rfind(prefix, 0) != 0 || name.size() >= sizeof address_.name)
    throw Error(ErrorCode::internal, format("fd passing: unexpected listener address '{}'", listener.address));
  // Non-blocking, so that a connection that went away between poll and accept cannot hang us.
  const int flags = ::fcntl(listener.fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(listener.fd.get(), F_SETFL, flags | O_NONBLOCK) != 0)
    throw Error(ErrorCode::system, "fd passing: fcntl(O_NONBLOCK) on the listening socket failed: " + errno_text(errno),
                "fcntl");
  const std::string token = make_random_hex(kTokenBytes);
  std::memcpy(address_.name, name.data(), name.size());
  std::memcpy(address_.token, token.data(), std::min(token.size(), sizeof address_.token - 1));
  listener_ = std::move(listener.fd);
}

std::string FdMailbox::send(const Address& to, std::uint64_t tag, int fd, Deadline deadline) {
  Wire wire{};
  std::memcpy(wire.magic, kMagic, sizeof kMagic);
  std::memcpy(wire.token, to.token, sizeof wire.token);
  wire.tag = tag;
  const std::string where = format("@{}", std::string(to.name, ::strnlen(to.name, sizeof to.name)));

  Fd connection;
  std::string why;
  const bool connected = retry_until(deadline, std::chrono::milliseconds(1), std::chrono::milliseconds(50), [&] {
    connection = Fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!connection) {
      why = "socket(AF_UNIX) failed: " + errno_text(errno);
      return Try::give_up;
    }
    socklen_t length = 0;
    const sockaddr_un address = abstract_address(to.name, &length);
    if (::connect(connection.get(), reinterpret_cast<const sockaddr*>(&address), length) == 0) return Try::done;
    const int error = errno;
    why = format("connecting to the mailbox {} failed: {}; has that rank exited?", where, errno_text(error));
    // A full backlog answers EAGAIN; anything else means the mailbox is not there.
    return error == EAGAIN || error == EINTR ? Try::again : Try::give_up;
  });
  if (!connected) return why;

  iovec io{&wire, sizeof wire};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&message);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  ssize_t n = -1;
  do {
    n = ::sendmsg(connection.get(), &message, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return format("sending a descriptor to the mailbox {} failed: {}", where, errno_text(errno));
  // The descriptor went with the first byte; the rest of the bytes (if the kernel took only a
  // part, which it does not for a message this small) follow plainly.
  const auto sent = static_cast<std::size_t>(n);
  if (sent < sizeof wire && !write_all(connection.get(), reinterpret_cast<const char*>(&wire) + sent, sizeof wire - sent))
    return format("sending to the mailbox {} failed after {} bytes: {}", where, sent, errno_text(errno));
  return {};
}

FdMailbox::Message FdMailbox::receive(Deadline deadline) {
  for (;;) {
    if (!wait_readable(listener_.get(), left_until(deadline)) && std::chrono::steady_clock::now() >= deadline)
      break;
    Fd connection(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!connection) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) continue;
      throw Error(ErrorCode::system,
                  "fd passing: accept on the mailbox @" + std::string(address_.name) + " failed: " + errno_text(errno),
                  "accept");
    }
    std::string drop;
    std::vector<Fd> fds;
    Wire wire{};
    if (!peer_is_same_user(connection.get())) {
      drop = "it came from a process of another user (SO_PEERCRED)";
    } else {
      drop = read_wire(connection.get(), wire, fds, deadline);
    }
    if (drop.empty() && std::memcmp(wire.magic, kMagic, sizeof kMagic) != 0) drop = "it is not an aperture fd message";
    if (drop.empty() && std::memcmp(wire.token, address_.token, sizeof wire.token) != 0)
      drop = "it did not present this mailbox's token";
    if (drop.empty() && fds.size() != 1) drop = format("it carried {} descriptors instead of 1", fds.size());
    if (drop.empty()) return Message{wire.tag, std::move(fds.front())};
    ++dropped_;
    last_drop_ = drop;  // `fds` closes whatever came with it
  }
  std::string message = format("fd passing: no descriptor arrived at the mailbox @{} in time", address_.name);
  if (dropped_ > 0)
    message += format(" ({} connection(s) dropped, the last because {})", dropped_, last_drop_);
  throw Error(ErrorCode::timeout,
              message + "; did a peer rank fail or exit? Raise APERTURE_TIMEOUT if it is only slow");
}

}  // namespace aperture::detail
