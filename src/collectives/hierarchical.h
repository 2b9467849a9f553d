// src/collectives/hierarchical.h — the collectives of a team that spans nodes.
//
// Within a node the ranks run the one-node algorithms (host.cpp, device.cu) on a node-local
// view of the Communicator's scratch: a CollectiveHandle whose rank and world are the node's
// local rank and size and whose table holds the node's ranks only. Between nodes the data
// travels through MPI, on communicators of the ranks that share a local rank ("columns"), or of
// the nodes' first ranks ("leaders"); GPU memory through pinned host staging. The algorithms,
// and which runs where, are in docs/MULTINODE.md ("Collectives across nodes").
//
// Reductions fold each node's ranks in rank order, then the nodes' partial results in node
// order, on every rank alike: every rank gets bit-identical results.
//
// On GPU memory the node's kernels get a cancel word (kernel_cancel.h), raised once the job
// fails: a kernel waiting for a node peer that has already thrown then gives up at once, and the
// host throws the failure that raised it (check()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "aperture/collectives/handle.h"
#include "aperture/collectives/types.h"
#include "aperture/provider.h"
#include "between_nodes_choice.h"
#include "dispatch.h"
#include "kernel_cancel.h"
#include "nccl_between_nodes.h"

namespace aperture {
class Team;
}

namespace aperture::collectives::detail {

// Where every rank of the team runs: node n's ranks in rank order, and each rank's place.
struct NodeLayout {
  std::vector<std::vector<int>> ranks_of_node;  // [node] -> team ranks, ascending
  std::vector<int> node_of;                     // [rank]
  std::vector<int> local_of;                    // [rank] -> index among its node's ranks
  int node = 0;                                 // this rank's
  int local = 0;

  static NodeLayout of(const Team& team);
  int nodes() const { return static_cast<int>(ranks_of_node.size()); }
  int local_size() const { return static_cast<int>(ranks_of_node[static_cast<std::size_t>(node)].size()); }
  // Every node has as many ranks (then the column phases run on every rank).
  bool even() const;
  // "3+1": the ranks per node, for messages.
  std::string shape() const;
};

// The one-node choices of the local phases, resolved for the node's rank count.
struct LocalChoices {
  std::size_t one_shot_max_bytes = 0;
  std::size_t ll_max_bytes = 0;
  std::size_t broadcast_ll_max_bytes = 0;
  int ll_parts = 1;
  std::size_t ll_part_bytes = 0;
  int max_parts = 1;
  int block_threads = 0;
  unsigned host_spins = 0;
};

class Hierarchy {
 public:
  // Collective over the team. Throws aperture::Error (unavailable) naming why when the team's
  // nodes cannot be joined: MPI did not start the ranks, aperture was built without MPI, or a
  // rank cannot reach a rank of its own node by load/store.
  Hierarchy(Team& team, MemoryKind kind, const CollectiveHandle& world_handle, const std::int64_t* world_table,
            const LocalChoices& choices);
  ~Hierarchy();
  Hierarchy(const Hierarchy&) = delete;
  Hierarchy& operator=(const Hierarchy&) = delete;

  const NodeLayout& layout() const { return layout_; }
  // What the exchange between nodes runs on (APERTURE_COLLECTIVES_BETWEEN_NODES), the same on
  // every rank (the constructor checks).
  BetweenNodes between_nodes() const { return between_; }
  // Throws the failure of an NCCL exchange that the watch found since (nccl_between_nodes.h), or
  // the job's failure that raised the kernels' cancel word (code peer_lost, naming the rank).
  void check() const;
  // Waits for the stream, polling it (not cudaStreamSynchronize) and check() meanwhile: a failure
  // between nodes is thrown as soon as it is known, not once the kernels it strands have ended
  // (NCCL's end only when its abort gets that far). Throws check()'s failure where there is one
  // (kernels that gave up on the cancel word, or NCCL's aborted, end the wait early too).
  void sync(void* stream);

  void barrier(void* stream);
  void broadcast(const void* in, void* out, std::size_t count, DataType type, int root, void* stream);
  void all_gather(const void* in, void* out, std::size_t count, DataType type, void* stream);
  void reduce_scatter(const void* in, void* out, std::size_t count, DataType type, ReduceOp op, void* stream);
  void all_reduce(const void* in, void* out, std::size_t count, DataType type, ReduceOp op, void* stream);
  void all_to_all(const void* in, void* out, std::size_t count, DataType type, void* stream);

  struct Mpi;  // the communicators (hierarchical.cpp)

 private:
  struct Buffer;
  void* work(int slot, std::size_t bytes);  // kind_ memory, kept between calls
  void* stage(int slot, std::size_t bytes);  // host memory (pinned for GPU memory)
  // The local phases: the one-node algorithm on the node's ranks.
  void local(Kind kind, const void* in, void* out, std::size_t count, DataType type, ReduceOp op, int root, void* stream);
  void local_all_reduce(const void* in, void* out, std::size_t count, DataType type, ReduceOp op, void* stream);
  void copy(void* out, const void* in, std::size_t bytes, void* stream);
  // Host memory that holds `bytes` of `p` (kind_ memory): p itself, or staging filled from it.
  const void* to_host(int slot, const void* p, std::size_t bytes, void* stream);
  // The input of a reduction, scaled by 1/world where op is avg on floats (NCCL's pre-multiply),
  // so that the phases below fold it as a sum.
  const void* prescaled(const void* in, std::size_t count, DataType type, ReduceOp op, void* stream);
  void all_reduce_whole(const void* in, void* out, std::size_t count, DataType type, ReduceOp op, void* stream);
  void all_reduce_sharded(const void* in, void* out, std::size_t count, DataType type, ReduceOp op, void* stream);
  bool nccl() const { return between_ == BetweenNodes::nccl; }
  // The NCCL groups: the column, the leaders, the team (made by the constructor on the NCCL path).
  enum NcclGroup { kColumn = 0, kLeaders = 1, kWorld = 2 };
  const NcclBetweenNodes::Group& group(NcclGroup g) const { return nccl_groups_[static_cast<std::size_t>(g)]; }

  Team& team_;
  MemoryKind kind_;
  // GPU memory: the node's kernels' cancel word and its watch (before the rest: freed last, once
  // no kernel can read it).
  std::uint64_t* cancel_word_ = nullptr;
  std::unique_ptr<KernelCancel> cancel_;
  NodeLayout layout_;
  LocalChoices choices_;
  CollectiveHandle local_handle_{};
  std::int64_t* local_table_ = nullptr;   // where the local phases run (device memory on a GPU)
  std::vector<std::int64_t> host_table_;  // the node's entries of the scratch table
  std::unique_ptr<Mpi> mpi_;
  BetweenNodes between_ = BetweenNodes::mpi;
  std::unique_ptr<NcclBetweenNodes> nccl_;  // the NCCL path's communicators, each made on first use
  std::vector<NcclBetweenNodes::Group> nccl_groups_;
  std::vector<std::unique_ptr<Buffer>> work_, stage_;
};

// Folds `nodes` partial results (node m's at parts + m * count elements; host memory) in node
// order into out (host memory): the cross-node step of every reduction. op avg folds as a sum;
// on integers the result is then divided by `world`, rounding towards zero.
void fold_nodes(DataType type, ReduceOp op, const void* parts, int nodes, void* out, std::size_t count, int world);
// out[i] = in[i] * (1 / world rounded to the type), rounded, as the one-node avg's first step.
void prescale_host(DataType type, const void* in, void* out, std::size_t count, int world);

// fold_nodes and prescale_host on GPU memory, on `stream` (device_fold_nodes.cu; the NCCL path).
void device_fold_nodes(DataType type, ReduceOp op, const void* parts, int nodes, void* out, std::size_t count, int world,
                       void* stream);
void device_prescale(DataType type, const void* in, void* out, std::size_t count, int world, void* stream);

// GPU memory for the staging (hierarchical_device.cu; hierarchical_device_none.cpp throws).
void* device_alloc(std::size_t bytes);
void device_free(void* p);
void* pinned_alloc(std::size_t bytes);
void pinned_free(void* p);
// True once everything enqueued on `stream` has finished; throws where the stream failed.
bool device_stream_idle(void* stream);
// True while `stream` is being captured into a CUDA graph (nothing may wait for it then).
bool device_stream_capturing(void* stream);
void device_table(std::int64_t** table, const std::int64_t* host, std::size_t entries);  // allocates and copies
// The node's kernels' cancel word (kernel_cancel.h): pinned, mapped host memory, zero; its address
// for the kernels in *device.
std::uint64_t* cancel_word_alloc(const std::uint64_t** device);
void cancel_word_free(std::uint64_t* word);
void device_quiesce();  // cudaDeviceSynchronize, its error ignored (a destructor's)

}  // namespace aperture::collectives::detail
