// src/bootstrap/hub_client.h — a rank's end of the rendezvous: the Team's transport.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "bootstrap/socket.h"

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
// names the missing ranks; the margin covers a hub that died).
class HubClient final : public TeamTransport {
 public:
  HubClient(const std::string& address, int rank, int world_size, const std::string& token,
            std::chrono::milliseconds timeout);
  ~HubClient() override;  // says goodbye, so the hub knows this rank left on purpose

  void barrier() override;
  void allgather(const void* mine, void* all, std::size_t bytes_each) override;
  void broadcast(void* buf, std::size_t bytes, int root) override;

  // Keeps a hub this rank runs (torchrun/mpirun rank 0) alive until every rank has left.
  void own_hub(std::unique_ptr<Hub> hub);

 private:
  std::string call(int op, std::uint64_t bytes, int root, const void* payload, std::uint64_t payload_bytes);

  std::string address_;
  int rank_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  std::uint64_t seq_ = 0;
  Fd fd_;
  std::string broken_;  // set once the connection failed; every later call repeats it
  std::unique_ptr<Hub> hub_;
};

}  // namespace aperture::detail
