// src/collectives/hierarchical.cpp — the collectives of a team that spans nodes (hierarchical.h):
// the node's phases on the one-node algorithms, the phase between nodes on MPI, or on NCCL for
// GPU memory (each collective below has both; `nccl()` says which runs).
#include "hierarchical.h"

#if defined(APERTURE_WITH_MPI)
#  ifndef OMPI_SKIP_MPICXX
#    define OMPI_SKIP_MPICXX 1
#  endif
#  ifndef MPICH_SKIP_MPICXX
#    define MPICH_SKIP_MPICXX 1
#  endif
#  include <mpi.h>
#endif

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>

#include "aperture/collectives/detail/float_formats.h"
#include "aperture/collectives/detail/reduce.h"
#include "aperture/detail/host_wait.h"
#include "aperture/error.h"
#include "aperture/team.h"
#include "bootstrap/launched_by.h"
#include "common/env.h"
#include "element_types.h"

namespace aperture::collectives::detail {

// ---- where the ranks run --------------------------------------------------------------------

NodeLayout NodeLayout::of(const Team& team) {
  NodeLayout l;
  l.ranks_of_node.resize(static_cast<std::size_t>(team.node_count()));
  l.node_of.resize(static_cast<std::size_t>(team.size()));
  l.local_of.resize(static_cast<std::size_t>(team.size()));
  for (int r = 0; r < team.size(); ++r) {
    auto& ranks = l.ranks_of_node[static_cast<std::size_t>(team.node_of(r))];
    l.node_of[static_cast<std::size_t>(r)] = team.node_of(r);
    l.local_of[static_cast<std::size_t>(r)] = static_cast<int>(ranks.size());
    ranks.push_back(r);
  }
  l.node = team.node();
  l.local = l.local_of[static_cast<std::size_t>(team.rank())];
  return l;
}

bool NodeLayout::even() const {
  return std::all_of(ranks_of_node.begin(), ranks_of_node.end(),
                     [&](const std::vector<int>& r) { return r.size() == ranks_of_node[0].size(); });
}

std::string NodeLayout::shape() const {
  std::string s;
  for (const auto& r : ranks_of_node) {
    if (!s.empty()) s += '+';
    s += std::to_string(r.size());
  }
  return s;
}

// ---- the cross-node fold ---------------------------------------------------------------------

namespace {

template <class T>
void fold_typed(ReduceOp op, const void* parts, int nodes, void* out, std::size_t count, int world) {
  const auto* p = static_cast<const T*>(parts);
  auto* o = static_cast<T*>(out);
  const auto run = [&](auto op_constant) {
    constexpr ReduceOp Op = decltype(op_constant)::value;
    const Fold<Op, T> f(1);  // the inputs are partial results: no scaling here
    const Fold<ReduceOp::avg, T> average(world);
    for (std::size_t i = 0; i < count; ++i) {
      auto acc = f.first(p[i]);
      for (int m = 1; m < nodes; ++m) acc = f.next(acc, p[static_cast<std::size_t>(m) * count + i]);
      if constexpr (Fold<ReduceOp::avg, T>::kDivides) {
        if (op == ReduceOp::avg) {
          o[i] = average.last(acc);
          continue;
        }
      }
      o[i] = f.last(acc);
    }
  };
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: run(std::integral_constant<ReduceOp, ReduceOp::sum>{}); break;
    case ReduceOp::prod: run(std::integral_constant<ReduceOp, ReduceOp::prod>{}); break;
    case ReduceOp::min: run(std::integral_constant<ReduceOp, ReduceOp::min>{}); break;
    case ReduceOp::max: run(std::integral_constant<ReduceOp, ReduceOp::max>{}); break;
  }
}

template <class T>
void prescale_typed(const void* in, void* out, std::size_t count, int world) {
  const Fold<ReduceOp::avg, T> f(world);
  const auto* i = static_cast<const T*>(in);
  auto* o = static_cast<T*>(out);
  for (std::size_t k = 0; k < count; ++k) o[k] = Accumulate<T>::out(f.first(i[k]));  // exact: first() rounded it
}

bool prescales(DataType type, ReduceOp op) { return op == ReduceOp::avg && is_floating(type); }
// What the node's phase folds: avg as a sum (scaled before on floats, divided after on integers).
ReduceOp node_op(ReduceOp op) { return op == ReduceOp::avg ? ReduceOp::sum : op; }

}  // namespace

void fold_nodes(DataType type, ReduceOp op, const void* parts, int nodes, void* out, std::size_t count, int world) {
  visit_element_type(type, [&]<DataType D>() { fold_typed<CpuType<D>>(op, parts, nodes, out, count, world); });
}

void prescale_host(DataType type, const void* in, void* out, std::size_t count, int world) {
  visit_element_type(type, [&]<DataType D>() { prescale_typed<CpuType<D>>(in, out, count, world); });
}

// ---- buffers ---------------------------------------------------------------------------------

struct Hierarchy::Buffer {
  MemoryKind kind;
  bool pinned;
  void* ptr = nullptr;
  std::size_t bytes = 0;
  Buffer(MemoryKind k, bool p) : kind(k), pinned(p) {}
  ~Buffer() { release(); }
  void release() {
    if (ptr == nullptr) return;
    if (kind == MemoryKind::device) {
      device_free(ptr);
    } else if (pinned) {
      pinned_free(ptr);
    } else {
      std::free(ptr);
    }
    ptr = nullptr;
  }
  void* get(std::size_t want) {
    if (want <= bytes && ptr != nullptr) return ptr;
    release();
    bytes = std::max<std::size_t>(want, 4096);
    ptr = kind == MemoryKind::device ? device_alloc(bytes) : pinned ? pinned_alloc(bytes) : std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (ptr == nullptr) throw Error(ErrorCode::out_of_memory, "Communicator (across nodes): no memory for " + std::to_string(bytes) + " bytes of staging");
    return ptr;
  }
};

void* Hierarchy::work(int slot, std::size_t bytes) {
  while (work_.size() <= static_cast<std::size_t>(slot)) work_.push_back(std::make_unique<Buffer>(kind_, false));
  return work_[static_cast<std::size_t>(slot)]->get(bytes);
}

void* Hierarchy::stage(int slot, std::size_t bytes) {
  while (stage_.size() <= static_cast<std::size_t>(slot))
    stage_.push_back(std::make_unique<Buffer>(MemoryKind::host, kind_ == MemoryKind::device));
  return stage_[static_cast<std::size_t>(slot)]->get(bytes);
}

void Hierarchy::copy(void* out, const void* in, std::size_t bytes, void* stream) {
  if (bytes == 0 || out == in) return;
  if (kind_ == MemoryKind::host) {
    std::memmove(out, in, bytes);
  } else {
    device_copy(out, in, bytes, stream);
  }
}

const void* Hierarchy::to_host(int slot, const void* p, std::size_t bytes, void* stream) {
  if (kind_ == MemoryKind::host) return p;
  void* host = stage(slot, bytes);
  device_copy(host, p, bytes, stream);
  sync(stream);
  return host;
}

// ---- the local phases ------------------------------------------------------------------------

void Hierarchy::local(Kind kind, const void* in, void* out, std::size_t count, DataType type, ReduceOp op, int root,
                      void* stream) {
  const int L = layout_.local_size();
  const std::size_t bytes = count * size_of(type);
  if (L == 1) {  // a node of one rank: the phase is the identity
    if (kind == Kind::barrier) return;
    copy(out, in, bytes, stream);  // count is this rank's share in every kind
    return;
  }
  Call c{kind, in, out, count, type, op, root};
  if (kind_ == MemoryKind::host) {
    run_on_host(local_handle_, c, choices_.host_spins);
    return;
  }
  const bool ll = kind == Kind::all_gather_ll || kind == Kind::reduce_scatter_ll || kind == Kind::all_reduce_ll;
  const std::size_t payload = kind == Kind::all_gather ? bytes * static_cast<std::size_t>(L)
                              : kind == Kind::all_to_all ? bytes * static_cast<std::size_t>(L)
                                                         : bytes;
  const std::size_t per = ll ? choices_.ll_part_bytes : tuning::kDeviceBytesPerPart;
  const int cap = ll ? choices_.ll_parts : choices_.max_parts;
  const std::size_t share = kind == Kind::reduce_scatter || kind == Kind::reduce_scatter_ll ? bytes * static_cast<std::size_t>(L) : bytes;
  const std::size_t want = ((ll ? share : payload) + per - 1) / per;
  const int parts = static_cast<int>(std::clamp<std::size_t>(want, 1, static_cast<std::size_t>(cap)));
  device_launch(local_handle_, c, parts, choices_.block_threads, stream);
}

void Hierarchy::local_all_reduce(const void* in, void* out, std::size_t count, DataType type, ReduceOp op, void* stream) {
  const std::size_t bytes = count * size_of(type);
  const Kind kind = choices_.ll_max_bytes != 0 && bytes <= choices_.ll_max_bytes ? Kind::all_reduce_ll
                    : bytes <= choices_.one_shot_max_bytes || layout_.local_size() == 1 ? Kind::all_reduce_one_shot
                                                                                          : Kind::all_reduce_two_shot;
  local(kind, in, out, count, type, op, 0, stream);
}

const void* Hierarchy::prescaled(const void* in, std::size_t count, DataType type, ReduceOp op, void* stream) {
  if (!prescales(type, op) || count == 0) return in;
  const std::size_t bytes = count * size_of(type);
  const int world = team_.size();
  if (kind_ == MemoryKind::host) {
    void* scaled = work(3, bytes);
    prescale_host(type, in, scaled, count, world);
    return scaled;
  }
  if (nccl()) {  // GPU memory on the NCCL path: a kernel on the stream, no host wait
    void* scaled = work(3, bytes);
    device_prescale(type, in, scaled, count, world, stream);
    return scaled;
  }
  // GPU memory on the MPI path: scaled on the host, between two copies (avg on floats only).
  const void* host = to_host(3, in, bytes, stream);
  void* scaled_host = stage(4, bytes);
  prescale_host(type, host, scaled_host, count, world);
  void* scaled = work(3, bytes);
  device_copy(scaled, scaled_host, bytes, stream);
  return scaled;
}

// ---- MPI -------------------------------------------------------------------------------------

#if defined(APERTURE_WITH_MPI)

struct Hierarchy::Mpi {
  MPI_Comm world = MPI_COMM_NULL;   // the team, in rank order
  MPI_Comm column = MPI_COMM_NULL;  // the ranks of this local rank, in node order (even nodes)
  MPI_Comm leaders = MPI_COMM_NULL;  // every node's first rank, in node order; null elsewhere
  std::uint64_t timeout_ns = 0;
  std::string peers_column, peers_leaders, peers_world;  // for messages

  ~Mpi() {
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (MPI_Comm* c : {&column, &leaders, &world})
      if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }

  static void check(int code, const char* what) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw Error(ErrorCode::peer_lost, std::string("Communicator (across nodes): ") + what + " failed: " + text);
  }

  // Waits for a nonblocking MPI call as every host wait does (detail/backoff.h): a rank that died
  // ends it at once, naming the rank (the Team's job watch); silence, after APERTURE_TIMEOUT.
  void wait(MPI_Request& request, const char* what, const std::string& peers) const {
    aperture::detail::Backoff backoff(timeout_ns, 64);
    for (;;) {
      int done = 0;
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
      if (done) return;
      const bool more = backoff.pause([&] {
        const std::string failure = aperture::detail::reported_job_failure();
        if (!failure.empty())
          throw Error(ErrorCode::peer_lost, std::string("Communicator (across nodes): ") + what + " among ranks " + peers +
                                                " abandoned: " + failure);
      });
      if (!more)
        throw Error(ErrorCode::timeout, std::string("Communicator (across nodes): ") + what + " among ranks " + peers +
                                            " did not complete within APERTURE_TIMEOUT (" +
                                            std::to_string(static_cast<double>(timeout_ns) / 1e9) +
                                            " s): a rank of another node did not make the same call, or is lost");
    }
  }
};

namespace {

int mpi_count(std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(INT_MAX))
    throw Error(ErrorCode::invalid_argument, "Communicator (across nodes): " + std::to_string(bytes) +
                                                 " bytes in one exchange between nodes; MPI takes at most " +
                                                 std::to_string(INT_MAX) + " per call: split the call");
  return static_cast<int>(bytes);
}

std::string list_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) {
    if (!s.empty()) s += ", ";
    s += std::to_string(r);
  }
  return s;
}

}  // namespace

#else

struct Hierarchy::Mpi {};

#endif

Hierarchy::Hierarchy(Team& team, MemoryKind kind, const CollectiveHandle& world_handle, const std::int64_t* world_table,
                     const LocalChoices& choices)
    : team_(team), kind_(kind), layout_(NodeLayout::of(team)), choices_(choices) {
  const auto& mine = layout_.ranks_of_node[static_cast<std::size_t>(layout_.node)];
  // Within the node every rank must be direct: the node's phases are load/store.
  for (int r : mine)
    if (world_table[r] == 0)
      throw Error(ErrorCode::unavailable, "Communicator: rank " + std::to_string(team.rank()) + " cannot reach rank " +
                                              std::to_string(r) + " of its own node by load/store (table entry 0); the "
                                              "collectives need every rank of a node directly addressable (peer access)");
#if !defined(APERTURE_WITH_MPI)
  throw Error(ErrorCode::unavailable, "Communicator: the team spans " + std::to_string(layout_.nodes()) +
                                          " nodes, and the collectives between nodes run on MPI, but aperture was built "
                                          "without MPI; rebuild with MPI found (libopenmpi-dev)");
#else
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!aperture::detail::mpi_knows_the_ranks(team) || !initialized || finalized)
    throw Error(ErrorCode::unavailable, "Communicator: the team spans " + std::to_string(layout_.nodes()) + " nodes (" +
                                            layout_.shape() + " ranks), and the collectives between nodes run on MPI, "
                                            "but its ranks were started by " + std::string(team.launched_by()) +
                                            ": start them with mpirun, `aperture launch --mpi` or `srun --mpi=pmix`");
  mpi_ = std::make_unique<Mpi>();
  mpi_->timeout_ns = world_handle.timeout_ns;
  Mpi::check(MPI_Comm_split(MPI_COMM_WORLD, 0, team.rank(), &mpi_->world), "MPI_Comm_split (the team)");
  MPI_Comm_set_errhandler(mpi_->world, MPI_ERRORS_RETURN);
  Mpi::check(MPI_Comm_split(mpi_->world, layout_.local, layout_.node, &mpi_->column), "MPI_Comm_split (columns)");
  Mpi::check(MPI_Comm_split(mpi_->world, layout_.local == 0 ? 0 : MPI_UNDEFINED, layout_.node, &mpi_->leaders),
             "MPI_Comm_split (leaders)");
  std::vector<int> column, leaders, everyone;
  for (const auto& ranks : layout_.ranks_of_node) {
    if (static_cast<int>(ranks.size()) > layout_.local) column.push_back(ranks[static_cast<std::size_t>(layout_.local)]);
    leaders.push_back(ranks[0]);
  }
  for (int r = 0; r < team.size(); ++r) everyone.push_back(r);
  mpi_->peers_column = list_ranks(column);
  mpi_->peers_leaders = list_ranks(leaders);
  mpi_->peers_world = list_ranks(everyone);
  // The exchange between nodes: NCCL or MPI for GPU memory (between_nodes_choice.h). Every rank
  // must take the same, or their calls would not meet.
  between_ = choose_between_nodes(kind_, NcclBetweenNodes::built(), env::collectives_between_nodes());
  team.check_same("Communicator (across nodes)",
                  {{"APERTURE_COLLECTIVES_BETWEEN_NODES (1 nccl, 0 mpi)", between_ == BetweenNodes::nccl ? 1u : 0u}});
  if (nccl()) {
    // A failed exchange also stops this rank's node kernels (made below; none run before).
    nccl_ = std::make_unique<NcclBetweenNodes>(mpi_->timeout_ns, [this](const std::string& failure) {
      if (cancel_) cancel_->raise(failure);
    });
    nccl_groups_.resize(NcclBetweenNodes::kGroups);
    const std::pair<MPI_Comm*, const std::string*> groups[] = {
        {&mpi_->column, &mpi_->peers_column}, {&mpi_->leaders, &mpi_->peers_leaders}, {&mpi_->world, &mpi_->peers_world}};
    for (int g = 0; g < NcclBetweenNodes::kGroups; ++g) {
      MPI_Comm* comm = groups[g].first;
      const std::string* peers = groups[g].second;
      NcclBetweenNodes::Group& group = nccl_groups_[static_cast<std::size_t>(g)];
      group.id = g;
      group.ranks = *peers;
      if (*comm == MPI_COMM_NULL) continue;  // not a leader: never exchanges in that group
      MPI_Comm_rank(*comm, &group.rank);
      MPI_Comm_size(*comm, &group.size);
      // NCCL's unique id, from the group's first rank to the others over the group's MPI communicator.
      group.share = [this, comm, peers](void* bytes, std::size_t size) {
        MPI_Request r;
        Mpi::check(MPI_Ibcast(bytes, mpi_count(size), MPI_BYTE, 0, *comm, &r), "MPI_Ibcast (NCCL's unique id)");
        mpi_->wait(r, "sharing NCCL's unique id", *peers);
      };
    }
  }
#endif
  // The node's view of the scratch: its flags, lines and staging are laid out for the whole team,
  // a node-sized handle uses the first local_size() of each.
  for (int r : mine) host_table_.push_back(world_table[r]);
  local_handle_ = world_handle;
  local_handle_.rank = layout_.local;
  local_handle_.world_size = layout_.local_size();
  if (kind_ == MemoryKind::device) {
    device_table(&local_table_, host_table_.data(), host_table_.size());
    local_handle_.peer_bases = local_table_;
    // The node's kernels stop waiting once the job fails (kernel_cancel.h); host waits already
    // ask the job watch themselves.
    const std::uint64_t* word_for_kernels = nullptr;
    cancel_word_ = cancel_word_alloc(&word_for_kernels);
    try {
      cancel_ = std::make_unique<KernelCancel>(cancel_word_, [] { return aperture::detail::reported_job_failure(); });
    } catch (...) {
      cancel_word_free(cancel_word_);
      throw;
    }
    local_handle_.cancel = word_for_kernels;
  } else {
    local_handle_.peer_bases = host_table_.data();
  }
}

Hierarchy::~Hierarchy() {
  nccl_.reset();  // waits for its exchanges, which use the work buffers
  work_.clear();
  stage_.clear();
  if (local_table_ != nullptr) device_free(local_table_);
  if (cancel_word_ != nullptr) {
    device_quiesce();  // no kernel reads the word after this (the watch still ends a stuck one)
    cancel_.reset();
    cancel_word_free(cancel_word_);
  }
}

void Hierarchy::check() const {
  if (nccl_) nccl_->check();
  if (cancel_ && cancel_->raised())
    throw Error(ErrorCode::peer_lost, "Communicator (rank " + std::to_string(team_.rank()) +
                                          ", across nodes): the collectives were abandoned (the node's kernels were "
                                          "told to stop waiting): " +
                                          cancel_->reason());
}

void Hierarchy::sync(void* stream) {
  // A stream being captured into a CUDA graph runs nothing yet: waiting for it would fail (and,
  // in the global capture mode, end the capture). Only the NCCL path keeps every collective but
  // the barrier on the stream alone.
  if (device_stream_capturing(stream))
    throw Error(ErrorCode::unavailable,
                "Communicator (rank " + std::to_string(team_.rank()) +
                    ", across nodes): this call waits on the host between its phases (MPI between the nodes, "
                    "or the barrier), which a stream being captured into a CUDA graph cannot do: call it outside "
                    "the capture, or capture it on the NCCL path (GPU memory with "
                    "APERTURE_COLLECTIVES_BETWEEN_NODES=nccl or auto, every collective but the barrier)");
  // No bound of its own: the kernels bound their waits (APERTURE_TIMEOUT), the watch NCCL's.
  aperture::detail::Backoff backoff(std::uint64_t{1} << 62);
  try {
    while (!device_stream_idle(stream)) backoff.pause([this] { check(); });
  } catch (const Error&) {
    check();  // the stream failed after the watch aborted NCCL's kernels: report the cause
    throw;
  }
  check();
}

#if defined(APERTURE_WITH_MPI)

// ---- the collectives -------------------------------------------------------------------------
//
// Notation: N nodes, node n has L_n ranks, this rank is local rank l of node n. "Column l": the
// l-th ranks of every node (on even nodes, N ranks); "leaders": column 0.

void Hierarchy::barrier(void* stream) {
  local(Kind::barrier, nullptr, nullptr, 0, DataType::uint8, ReduceOp::sum, 0, stream);
  // A barrier meets on the host on either path (it moves no data; NCCL has none): MPI's. An NCCL
  // exchange before it that failed, or a lost rank, ends the wait (sync() throws it).
  if (kind_ == MemoryKind::device) sync(stream);
  if (layout_.local == 0) {
    MPI_Request r;
    Mpi::check(MPI_Ibarrier(mpi_->leaders, &r), "MPI_Ibarrier");
    mpi_->wait(r, "the barrier between nodes", mpi_->peers_leaders);
  }
  local(Kind::barrier, nullptr, nullptr, 0, DataType::uint8, ReduceOp::sum, 0, stream);
}

// The root's node spreads it within the node, its first rank to the other nodes' first ranks,
// and they within their nodes.
void Hierarchy::broadcast(const void* in, void* out, std::size_t count, DataType type, int root, void* stream) {
  const std::size_t bytes = count * size_of(type);
  const int root_node = layout_.node_of[static_cast<std::size_t>(root)];
  const int root_local = layout_.local_of[static_cast<std::size_t>(root)];
  const bool ll = choices_.broadcast_ll_max_bytes != 0 && bytes <= choices_.broadcast_ll_max_bytes;
  const Kind kind = ll ? Kind::broadcast_ll : Kind::broadcast;
  if (layout_.node == root_node) local(kind, in, out, count, type, ReduceOp::sum, root_local, stream);
  if (nccl() && layout_.local == 0 && bytes != 0) {
    nccl_->broadcast(group(kLeaders), out, bytes, root_node, stream, "the broadcast between nodes");
  } else if (layout_.local == 0 && bytes != 0) {
    void* host = kind_ == MemoryKind::host ? out : stage(0, bytes);
    if (kind_ == MemoryKind::device && layout_.node == root_node) {
      device_copy(host, out, bytes, stream);
      sync(stream);
    }
    if (kind_ == MemoryKind::device && layout_.node != root_node) sync(stream);  // staging free again
    MPI_Request r;
    Mpi::check(MPI_Ibcast(host, mpi_count(bytes), MPI_BYTE, root_node, mpi_->leaders, &r), "MPI_Ibcast");
    mpi_->wait(r, "the broadcast between nodes", mpi_->peers_leaders);
    if (kind_ == MemoryKind::device && layout_.node != root_node) device_copy(out, host, bytes, stream);
  }
  if (layout_.node != root_node) local(kind, out, out, count, type, ReduceOp::sum, 0, stream);
}

void Hierarchy::all_gather(const void* in, void* out, std::size_t count, DataType type, void* stream) {
  const std::size_t bytes = count * size_of(type);
  const int N = layout_.nodes();
  if (bytes == 0) return;
  if (layout_.even()) {
    // Column: the inputs of the l-th ranks of every node; then the node gathers those blocks.
    const int L = layout_.local_size();
    void* gathered_in = nullptr;
    if (nccl()) {
      gathered_in = work(0, bytes * N);
      nccl_->all_gather(group(kColumn), in, gathered_in, bytes, stream, "all_gather between nodes");
    } else {
      const void* mine = to_host(1, in, bytes, stream);
      void* column = kind_ == MemoryKind::host ? work(0, bytes * N) : stage(0, bytes * N);
      MPI_Request r;
      Mpi::check(MPI_Iallgather(mine, mpi_count(bytes), MPI_BYTE, column, mpi_count(bytes), MPI_BYTE, mpi_->column, &r),
                 "MPI_Iallgather");
      mpi_->wait(r, "all_gather between nodes", mpi_->peers_column);
      gathered_in = column;
      if (kind_ == MemoryKind::device) {
        gathered_in = work(0, bytes * N);
        device_copy(gathered_in, column, bytes * N, stream);
      }
    }
    // H[l'][m] = the input of node m's rank l'.
    auto* node_blocks = static_cast<unsigned char*>(work(1, bytes * N * L));
    local(Kind::all_gather, gathered_in, node_blocks, count * static_cast<std::size_t>(N), type, ReduceOp::sum, 0, stream);
    for (int lp = 0; lp < L; ++lp)
      for (int m = 0; m < N; ++m)
        copy(static_cast<unsigned char*>(out) +
                 static_cast<std::size_t>(layout_.ranks_of_node[static_cast<std::size_t>(m)][static_cast<std::size_t>(lp)]) * bytes,
             node_blocks + (static_cast<std::size_t>(lp) * N + m) * bytes, bytes, stream);
    return;
  }
  // Uneven nodes: gather within the node, the first ranks exchange their nodes' blocks, and
  // spread the whole result within their nodes.
  const int L = layout_.local_size();
  auto* node_blocks = static_cast<unsigned char*>(work(1, bytes * L));
  local(Kind::all_gather, in, node_blocks, count, type, ReduceOp::sum, 0, stream);
  if (nccl() && layout_.local == 0) {
    auto* all = static_cast<unsigned char*>(work(2, bytes * team_.size()));
    std::vector<std::size_t> node_bytes;
    for (const auto& ranks : layout_.ranks_of_node) node_bytes.push_back(bytes * ranks.size());
    nccl_->all_gather_varying(group(kLeaders), node_blocks, all, node_bytes, stream, "all_gather between nodes");
    const unsigned char* from = all;
    for (const auto& ranks : layout_.ranks_of_node)
      for (int rank : ranks) {
        copy(static_cast<unsigned char*>(out) + static_cast<std::size_t>(rank) * bytes, from, bytes, stream);
        from += bytes;
      }
  } else if (layout_.local == 0) {
    const void* host_blocks = to_host(1, node_blocks, bytes * L, stream);
    auto* all = static_cast<unsigned char*>(stage(2, bytes * team_.size()));
    std::vector<int> counts, displs;
    int at = 0;
    for (const auto& ranks : layout_.ranks_of_node) {
      counts.push_back(mpi_count(bytes * ranks.size()));
      displs.push_back(at);
      at += counts.back();
    }
    MPI_Request r;
    Mpi::check(MPI_Iallgatherv(host_blocks, mpi_count(bytes * L), MPI_BYTE, all, counts.data(), displs.data(), MPI_BYTE,
                               mpi_->leaders, &r),
               "MPI_Iallgatherv");
    mpi_->wait(r, "all_gather between nodes", mpi_->peers_leaders);
    const unsigned char* from = all;
    for (const auto& ranks : layout_.ranks_of_node)
      for (int rank : ranks) {
        copy(static_cast<unsigned char*>(out) + static_cast<std::size_t>(rank) * bytes, from, bytes, stream);
        from += bytes;
      }
  }
  local(Kind::broadcast, out, out, count * static_cast<std::size_t>(team_.size()), type, ReduceOp::sum, 0, stream);
}

void Hierarchy::all_reduce(const void* in, void* out, std::size_t count, DataType type, ReduceOp op, void* stream) {
  if (count == 0) return;
  const std::size_t bytes = count * size_of(type);
  const void* input = prescaled(in, count, type, op, stream);
  if (!layout_.even() || bytes <= tuning::kNodesWholeVectorMaxBytes || count < static_cast<std::size_t>(layout_.local_size()))
    all_reduce_whole(input, out, count, type, op, stream);
  else
    all_reduce_sharded(input, out, count, type, op, stream);
}

// The node reduces the whole vector; every rank (even nodes) or the first (uneven) exchanges it
// with its column and folds; uneven nodes then spread it within the node.
void Hierarchy::all_reduce_whole(const void* in, void* out, std::size_t count, DataType type, ReduceOp op, void* stream) {
  const std::size_t bytes = count * size_of(type);
  const int N = layout_.nodes();
  const bool even = layout_.even();
  local_all_reduce(in, out, count, type, node_op(op), stream);
  if (nccl() && (even || layout_.local == 0)) {
    // The nodes' partials gathered on the GPU, folded there in node order (device_fold_nodes.cu).
    void* parts = work(5, bytes * N);
    nccl_->all_gather(group(even ? kColumn : kLeaders), out, parts, bytes, stream, "all_reduce between nodes");
    device_fold_nodes(type, op, parts, N, out, count, team_.size(), stream);
  } else if (even || layout_.local == 0) {
    const void* mine = to_host(1, out, bytes, stream);
    auto* parts = stage(2, bytes * N);
    MPI_Request r;
    MPI_Comm comm = even ? mpi_->column : mpi_->leaders;
    Mpi::check(MPI_Iallgather(mine, mpi_count(bytes), MPI_BYTE, parts, mpi_count(bytes), MPI_BYTE, comm, &r),
               "MPI_Iallgather");
    mpi_->wait(r, "all_reduce between nodes", even ? mpi_->peers_column : mpi_->peers_leaders);
    void* folded = kind_ == MemoryKind::host ? out : stage(1, bytes);
    fold_nodes(type, op, parts, N, folded, count, team_.size());
    if (kind_ == MemoryKind::device) device_copy(out, folded, bytes, stream);
  }
  if (!even) local(Kind::broadcast, out, out, count, type, ReduceOp::sum, 0, stream);
}

// Even nodes, larger vectors: the node reduce-scatters into shards (padded to a multiple of the
// node's ranks), each rank exchanges its shard with its column and folds, the node all-gathers.
void Hierarchy::all_reduce_sharded(const void* in, void* out, std::size_t count, DataType type, ReduceOp op,
                                   void* stream) {
  const std::size_t s = size_of(type);
  const int N = layout_.nodes();
  const std::size_t L = static_cast<std::size_t>(layout_.local_size());
  const std::size_t shard = (count + L - 1) / L;
  const std::size_t padded = shard * L;
  const void* input = in;
  if (padded != count) {
    auto* p = static_cast<unsigned char*>(work(0, padded * s));
    copy(p, in, count * s, stream);
    if (kind_ == MemoryKind::host) std::memset(p + count * s, 0, (padded - count) * s);  // folded, never read
    input = p;
  }
  void* mine = work(1, shard * s);
  const bool ll = choices_.ll_max_bytes != 0 && padded * s <= choices_.ll_max_bytes;
  local(ll ? Kind::reduce_scatter_ll : Kind::reduce_scatter, input, mine, shard, type, node_op(op), 0, stream);
  if (nccl()) {
    void* parts = work(5, shard * s * N);
    nccl_->all_gather(group(kColumn), mine, parts, shard * s, stream, "all_reduce between nodes");
    device_fold_nodes(type, op, parts, N, mine, shard, team_.size(), stream);
  } else {
    const void* host_mine = to_host(1, mine, shard * s, stream);
    auto* parts = stage(2, shard * s * N);
    MPI_Request r;
    Mpi::check(MPI_Iallgather(host_mine, mpi_count(shard * s), MPI_BYTE, parts, mpi_count(shard * s), MPI_BYTE,
                              mpi_->column, &r),
               "MPI_Iallgather");
    mpi_->wait(r, "all_reduce between nodes", mpi_->peers_column);
    void* folded = kind_ == MemoryKind::host ? mine : stage(3, shard * s);
    fold_nodes(type, op, parts, N, folded, shard, team_.size());
    if (kind_ == MemoryKind::device) device_copy(mine, folded, shard * s, stream);
  }
  void* gathered = padded == count ? out : work(0, padded * s);
  local(Kind::all_gather, mine, gathered, shard, type, ReduceOp::sum, 0, stream);
  if (gathered != out) copy(out, gathered, count * s, stream);
}

void Hierarchy::reduce_scatter(const void* in, void* out, std::size_t count, DataType type, ReduceOp op, void* stream) {
  if (count == 0) return;
  const std::size_t bytes = count * size_of(type);
  const int N = layout_.nodes();
  const int world = team_.size();
  const void* input = prescaled(in, count * static_cast<std::size_t>(world), type, op, stream);
  if (!layout_.even()) {  // the whole vector, then this rank's slice
    void* all = work(4, bytes * world);
    all_reduce_whole(input, all, count * static_cast<std::size_t>(world), type, op, stream);
    copy(out, static_cast<const unsigned char*>(all) + static_cast<std::size_t>(team_.rank()) * bytes, bytes, stream);
    return;
  }
  // Arrange the input so that local rank l' receives the node's partial of the slices of every
  // node's l'-th rank, then exchange those partials in the column.
  const int L = layout_.local_size();
  auto* arranged = static_cast<unsigned char*>(work(0, bytes * world));
  for (int lp = 0; lp < L; ++lp)
    for (int m = 0; m < N; ++m)
      copy(arranged + (static_cast<std::size_t>(lp) * N + m) * bytes,
           static_cast<const unsigned char*>(input) +
               static_cast<std::size_t>(layout_.ranks_of_node[static_cast<std::size_t>(m)][static_cast<std::size_t>(lp)]) * bytes,
           bytes, stream);
  void* partials = work(1, bytes * N);
  const bool ll = choices_.ll_max_bytes != 0 && bytes * world <= choices_.ll_max_bytes;
  local(ll ? Kind::reduce_scatter_ll : Kind::reduce_scatter, arranged, partials, count * static_cast<std::size_t>(N), type,
        node_op(op), 0, stream);
  if (nccl()) {
    void* received = work(2, bytes * N);
    nccl_->all_to_all(group(kColumn), partials, received, bytes, stream, "reduce_scatter between nodes");
    device_fold_nodes(type, op, received, N, out, count, world, stream);
    return;
  }
  const void* send = to_host(1, partials, bytes * N, stream);
  auto* received = stage(2, bytes * N);
  MPI_Request r;
  Mpi::check(MPI_Ialltoall(send, mpi_count(bytes), MPI_BYTE, received, mpi_count(bytes), MPI_BYTE, mpi_->column, &r),
             "MPI_Ialltoall");
  mpi_->wait(r, "reduce_scatter between nodes", mpi_->peers_column);
  void* folded = kind_ == MemoryKind::host ? out : stage(3, bytes);
  fold_nodes(type, op, received, N, folded, count, world);
  if (kind_ == MemoryKind::device) device_copy(out, folded, bytes, stream);
}

void Hierarchy::all_to_all(const void* in, void* out, std::size_t count, DataType type, void* stream) {
  if (count == 0) return;
  const std::size_t bytes = count * size_of(type);
  const int N = layout_.nodes();
  const int world = team_.size();
  if (!layout_.even() && nccl()) {  // uneven nodes: NCCL's all-to-all over the team
    const auto* i = static_cast<const unsigned char*>(in);
    auto* o = static_cast<unsigned char*>(out);
    const std::size_t total = bytes * world;
    const bool overlap = i < o + total && o < i + total;
    void* received = overlap ? work(2, total) : out;
    nccl_->all_to_all(group(kWorld), in, received, bytes, stream, "all_to_all between nodes");
    copy(out, received, total, stream);
    return;
  }
  if (!layout_.even()) {  // uneven nodes: MPI's all-to-all over the team
    const void* send = to_host(1, in, bytes * world, stream);
    void* received = kind_ == MemoryKind::host ? out : stage(2, bytes * world);
    MPI_Request r;
    Mpi::check(MPI_Ialltoall(send, mpi_count(bytes), MPI_BYTE, received, mpi_count(bytes), MPI_BYTE, mpi_->world, &r),
               "MPI_Ialltoall");
    mpi_->wait(r, "all_to_all between nodes", mpi_->peers_world);
    if (kind_ == MemoryKind::device) device_copy(out, received, bytes * world, stream);
    return;
  }
  // 1. Within the node, local rank l' gets from every local rank the blocks for the l'-th ranks
  //    of every node. 2. The column exchanges them node by node.
  const int L = layout_.local_size();
  const auto rank_at = [&](int m, int lp) {
    return static_cast<std::size_t>(layout_.ranks_of_node[static_cast<std::size_t>(m)][static_cast<std::size_t>(lp)]);
  };
  auto* arranged = static_cast<unsigned char*>(work(0, bytes * world));  // [l'][m]
  for (int lp = 0; lp < L; ++lp)
    for (int m = 0; m < N; ++m)
      copy(arranged + (static_cast<std::size_t>(lp) * N + m) * bytes, static_cast<const unsigned char*>(in) + rank_at(m, lp) * bytes,
           bytes, stream);
  auto* from_node = static_cast<unsigned char*>(work(1, bytes * world));  // [l][m]: local rank l's block for (m, me)
  local(Kind::all_to_all, arranged, from_node, count * static_cast<std::size_t>(N), type, ReduceOp::sum, 0, stream);
  // Regroup by destination node: [m][l].
  auto* by_node = static_cast<unsigned char*>(work(2, bytes * world));
  for (int m = 0; m < N; ++m)
    for (int l = 0; l < L; ++l)
      copy(by_node + (static_cast<std::size_t>(m) * L + l) * bytes, from_node + (static_cast<std::size_t>(l) * N + m) * bytes,
           bytes, stream);
  unsigned char* received = nullptr;
  if (nccl()) {
    received = static_cast<unsigned char*>(work(0, bytes * world));
    nccl_->all_to_all(group(kColumn), by_node, received, bytes * L, stream, "all_to_all between nodes");
  } else {
    const void* send = to_host(1, by_node, bytes * world, stream);
    received = static_cast<unsigned char*>(kind_ == MemoryKind::host ? work(0, bytes * world) : stage(2, bytes * world));
    MPI_Request r;
    Mpi::check(MPI_Ialltoall(send, mpi_count(bytes * L), MPI_BYTE, received, mpi_count(bytes * L), MPI_BYTE, mpi_->column,
                             &r),
               "MPI_Ialltoall");
    mpi_->wait(r, "all_to_all between nodes", mpi_->peers_column);
  }
  // received[m'][l]: what rank (m', l) sends this rank.
  for (int m = 0; m < N; ++m)
    for (int l = 0; l < L; ++l)
      copy(static_cast<unsigned char*>(out) + rank_at(m, l) * bytes, received + (static_cast<std::size_t>(m) * L + l) * bytes,
           bytes, stream);
}

#else

// Without MPI the constructor has refused already; nothing below is reached.
[[noreturn]] static void no_mpi() { throw Error(ErrorCode::internal, "Communicator (across nodes): built without MPI"); }
void Hierarchy::barrier(void*) { no_mpi(); }
void Hierarchy::broadcast(const void*, void*, std::size_t, DataType, int, void*) { no_mpi(); }
void Hierarchy::all_gather(const void*, void*, std::size_t, DataType, void*) { no_mpi(); }
void Hierarchy::reduce_scatter(const void*, void*, std::size_t, DataType, ReduceOp, void*) { no_mpi(); }
void Hierarchy::all_reduce(const void*, void*, std::size_t, DataType, ReduceOp, void*) { no_mpi(); }
void Hierarchy::all_to_all(const void*, void*, std::size_t, DataType, void*) { no_mpi(); }
void Hierarchy::all_reduce_whole(const void*, void*, std::size_t, DataType, ReduceOp, void*) { no_mpi(); }
void Hierarchy::all_reduce_sharded(const void*, void*, std::size_t, DataType, ReduceOp, void*) { no_mpi(); }

#endif

}  // namespace aperture::collectives::detail
