// src/bootstrap/fd_passing.h — handing file descriptors to the other ranks of this machine.
//
// Some things a rank shares cannot be sent as bytes: a CUDA allocation exported as a POSIX file
// descriptor (cuda-vmm) is such a thing. The kernel moves a descriptor from one process to
// another only over a Unix socket (SCM_RIGHTS), so each rank keeps a mailbox:
//
//   - a listening abstract Unix socket with a random name (no file to leave behind when a rank
//     crashes; the name lives as long as the socket), and
//   - a random token a sender must present with every descriptor.
//
// The mailbox's Address (name and token) travels to the peers through Team::allgather, the
// launcher's channel, so only the job's ranks learn it. Abstract names carry no permissions,
// so every connection is checked: one from another user (SO_PEERCRED) or one without the token
// is dropped and its descriptors closed; a stranger on the machine cannot slip a rank a
// descriptor, and a guessed name alone is not enough.
//
//     FdMailbox box;                                 // before the allgather
//     team.allgather(&box.address(), all.data(), sizeof(FdMailbox::Address));
//     FdMailbox::send(all[peer], tag, fd, deadline); // to every peer: never waits for the peer
//     auto message = box.receive(deadline);          // from every peer, in any order
//
// A send does not wait for the receiver (a connection waits in the listener's backlog, and the
// kernel holds a descriptor in flight even after the sender closes its own), so every rank can
// send to all its peers first and then receive, without deadlock.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <type_traits>

#include "bootstrap/socket.h"

namespace aperture::detail {

class FdMailbox {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // What a peer needs to send here; plain bytes, for allgather.
  struct Address {
    char name[64];   // the abstract socket name, NUL-terminated
    char token[40];  // the token, hex, NUL-terminated
  };
  static_assert(std::is_trivially_copyable_v<Address>, "an Address crosses processes as bytes");

  // One descriptor received, with the tag its sender gave it.
  struct Message {
    std::uint64_t tag = 0;
    Fd fd;
  };

  // Listens on a fresh abstract socket with a fresh token. Throws aperture::Error.
  FdMailbox();

  const Address& address() const { return address_; }

  // Sends a duplicate of `fd` (the caller keeps its own) with `tag` to the mailbox at `to`, over
  // a connection of its own. Returns "" or what failed; never throws, so the ranks can agree on
  // the outcome first.
  static std::string send(const Address& to, std::uint64_t tag, int fd, Deadline deadline);

  // The next descriptor from a process of this user that presented this mailbox's token.
  // Connections that fail a check are dropped and counted; the error at the deadline mentions
  // them. Throws aperture::Error when nothing valid arrives by `deadline`.
  Message receive(Deadline deadline);

 private:
  Fd listener_;
  Address address_{};
  int dropped_ = 0;
  std::string last_drop_;  // why the last dropped connection was dropped
};

}  // namespace aperture::detail
