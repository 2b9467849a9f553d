// src/bootstrap/hub_client.h — a rank's end of the rendezvous: the Team's transport.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "aperture/error.h"
#include "bootstrap/socket.h"
#include "bootstrap/wire.h"

namespace aperture::detail {

// What a Team needs from whatever connects the ranks.
class TeamTransport {
 public:
  virtual ~TeamTransport() = default;
  virtual void barrier() = 0;
  virtual void allgather(const void* mine, void* all, std::size_t bytes_each) = 0;
  virtual void broadcast(void* buf, std::size_t bytes, int root) = 0;
};

// A team of one rank: every collective is local.
class SoloTransport final : public TeamTransport {
 public:
  void barrier() override {}
  void allgather(const void* mine, void* all, std::size_t bytes_each) override;
  void broadcast(void*, std::size_t, int root) override;
};

class Hub;

// Talks to a Hub. Every call waits at most the hub's timeout plus a margin (the hub itself
// names the missing ranks; the margin covers a hub that died) for the answer to begin, and as
// long again for the rest of it once it has begun; every send gives up after that long too. The
// handshake (wire.h) makes the hub prove it knows the job token before this rank proves it.
class HubClient final : public TeamTransport {
 public:
  HubClient(const std::string& address, int rank, int world_size, const std::string& token,
            std::chrono::milliseconds timeout);
  // Joins the hub at the first of `addresses` whose listener proves it is this job's hub (a hub
  // that took the first free port of a range: a process of someone else's may listen on an
  // earlier one). One address: the hub must be there.
  HubClient(const std::vector<std::string>& addresses, int rank, int world_size, const std::string& token,
            std::chrono::milliseconds timeout);
  ~HubClient() override;  // says goodbye, so the hub knows this rank left on purpose

  void barrier() override;
  void allgather(const void* mine, void* all, std::size_t bytes_each) override;
  void broadcast(void* buf, std::size_t bytes, int root) override;

  // Keeps a hub this rank runs (torchrun/mpirun rank 0) alive until every rank has left.
  void own_hub(std::unique_ptr<Hub> hub);

  // Why the job failed, or "" while it has not; never blocks. Reads a failure notice the hub sent
  // unasked (a rank died, calls did not match) or notices the hub is gone. Behind the job watch
  // of host waits (aperture/detail/host_wait.h), which every HubClient joins while it lives.
  std::string poll_failure();

 private:
  std::string call(int op, std::uint64_t bytes, int root, const void* payload, std::uint64_t payload_bytes);
  // The handshake's two steps (wire.h): the hub proves the job token, then this rank does.
  struct Greeting {
    wire::Hello hello;
    wire::HubHello hub_hello;
  };
  struct NotTheHub {  // why a listener is not this job's hub (or refused this rank's hello)
    ErrorCode code;
    std::string text;  // names the address
  };
  void join(const std::string& address, const std::string& token);
  void join_first_of(const std::vector<std::string>& addresses, const std::string& token);
  void limit_sends();
  std::optional<NotTheHub> greet(const std::string& token, std::chrono::steady_clock::time_point deadline,
                                 Greeting& greeting);
  void prove(const std::string& token, const Greeting& greeting, std::chrono::steady_clock::time_point deadline);
  std::string refusal_text(std::uint64_t text_bytes, std::chrono::steady_clock::time_point deadline);
  std::string take_notice(const wire::Reply& notice);  // reads a notice's text; sets broken_

  std::string address_;
  int rank_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  std::uint64_t seq_ = 0;
  Fd fd_;
  std::string broken_;  // set once the connection failed; every later call repeats it
  ErrorCode broken_code_ = ErrorCode::internal;  // what kind of failure broken_ is
  std::unique_ptr<Hub> hub_;
  // Held through each call's exchange and by poll_failure (which only tries it): a host wait in
  // one thread never reads the connection while another thread's Team call does.
  std::mutex io_mutex_;
};

}  // namespace aperture::detail
