// src/collectives/nccl_between_nodes.h — the exchange between nodes of a team across nodes on
// NCCL, for GPU memory (hierarchical.h): straight from and into GPU buffers, on the caller's
// stream, with no host staging and no host wait.
//
// One NCCL communicator per group of ranks the hierarchy exchanges in (a column, the leaders, the
// whole team), made the first time the group exchanges, from an ncclUniqueId that the group's
// first rank makes and `Group::share` hands to the others (over MPI, hierarchical.cpp).
// Communicators are nonblocking (ncclConfig_t::blocking = 0): creation and every enqueue that
// NCCL reports in progress are polled, bounded by APERTURE_TIMEOUT, and end at once when the
// Team's job watch reports a lost rank. What runs on the GPU after the call returns is watched
// by a thread: an exchange not finished within APERTURE_TIMEOUT, an asynchronous NCCL error or a
// lost rank ends every communicator (ncclCommRevoke, which stops NCCL's kernels, then, once NCCL
// says it is quiescent or after 2 s, ncclCommAbort), and the next call, or check(), throws the
// failure, once that is done or after 1 s; a failure NCCL or the GPU reports while the job watch
// reports a lost rank (within 0.5 s) names that rank. After a failure the object refuses every
// exchange.
//
// nccl_between_nodes.cpp where aperture_collectives is built with NCCL;
// nccl_between_nodes_none.cpp otherwise (built() is false and nothing else is reached).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace aperture::collectives::detail {

class NcclBetweenNodes {
 public:
  // A group of ranks that exchange between nodes: this rank's place in it and how the group's
  // rank 0 hands its ncclUniqueId to the others (collective over the group).
  struct Group {
    int id = 0;     // which communicator: one per id, made on first use
    int rank = 0;   // in the group
    int size = 0;
    std::string ranks;  // the team's ranks of the group, for messages ("0, 2")
    std::function<void(void* bytes, std::size_t size)> share;
  };

  static constexpr int kGroups = 3;

  // Whether aperture_collectives was built with NCCL.
  static bool built();

  // on_failure: called once, with the failure as check() will throw it, when the first failure
  // is found (from the watch's thread or the caller's, under the object's lock: it must not call
  // back into this object).
  explicit NcclBetweenNodes(std::uint64_t timeout_ns, std::function<void(const std::string&)> on_failure = {});
  ~NcclBetweenNodes();  // finalizes (or aborts, after a failure) every communicator
  NcclBetweenNodes(const NcclBetweenNodes&) = delete;
  NcclBetweenNodes& operator=(const NcclBetweenNodes&) = delete;

  // out[r * bytes ...] = group rank r's in.
  void all_gather(const Group& g, const void* in, void* out, std::size_t bytes, void* stream, const char* what);
  // out = rank r's `bytes[r]` bytes after one another, in group rank order (an all-gather of
  // different sizes: one broadcast per rank, grouped).
  void all_gather_varying(const Group& g, const void* in, void* out, const std::vector<std::size_t>& bytes, void* stream,
                          const char* what);
  // buffer = group rank root's buffer.
  void broadcast(const Group& g, void* buffer, std::size_t bytes, int root, void* stream, const char* what);
  // out[r * bytes ...] = group rank r's in[rank * bytes ...].
  void all_to_all(const Group& g, const void* in, void* out, std::size_t bytes, void* stream, const char* what);

  // Throws the failure the watch found (a lost rank, a timeout, an asynchronous NCCL error), if any.
  void check() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace aperture::collectives::detail
