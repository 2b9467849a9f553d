// bench/host/bench_host.cpp — `aperture bench` on host memory: one rank's measurements.
//
// put/get move `bytes` between this rank and its right neighbour's symmetric buffer (one
// aperture::put/get), against memcpy of the same bytes inside this rank. The collectives run on
// an aperture::Communicator over the provider's memory, against Open MPI's collective of the
// same shape in the same processes (float, sum). Inputs are integers stored as floats, so both
// sides' sums are exact and are compared once per size: a benchmark of a wrong answer is no
// benchmark.
//
// node_put/node_get (on request, over nodes: docs/MULTINODE.md) move `bytes` to and from the rank
// with the same local index on the next node through the map's PeerView, i.e. through the engine
// (MPI RMA), against plain MPI_Put/MPI_Get + MPI_Win_flush on an MPI window of the same size and
// against MPI_Sendrecv of the same bytes, in the same processes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bench.h"
#include "bench_mpi.h"

#include "aperture/collectives/communicator.h"
#include "aperture/error.h"
#include "aperture/provider.h"
#include "aperture/rma.h"
#include "aperture/team.h"

namespace aperture::bench {

namespace {

const std::vector<std::string> kHostOps = {"barrier", "put", "get", "broadcast", "all_gather", "reduce_scatter", "all_reduce",
                                           "all_reduce.one_shot", "all_reduce.two_shot", "all_to_all"};
// Only on request (--ops): they need ranks on another node.
const std::vector<std::string> kNodeOps = {"node_put", "node_get"};
// Only on request: the staged broadcast at every size (the default takes the push path up to
// tuning::broadcast_ll_max_bytes), to compare the two paths in one run.
// broadcast.in_place: out == in on every rank, as MPI_Bcast is called. broadcast.symmetric: root's
// input in a symmetric allocation, the zero-copy form at every size (out apart; the default takes
// it from tuning::broadcast_direct_min_bytes). all_reduce.ll: the push path at every size (the
// host's automatic choice takes the staged one-shot or two-shot).
const std::vector<std::string> kPathOps = {"broadcast.staged", "broadcast.in_place", "broadcast.symmetric",
                                           "all_reduce.ll"};

void fill(std::vector<float>& v, int rank, int salt) {
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((rank + 1) * 7 + static_cast<int>(i % 1000) + salt);
}

void expect_same(const std::vector<float>& a, const std::vector<float>& b, std::size_t n, const std::string& what,
                 int rank) {
  for (std::size_t i = 0; i < n; ++i)
    if (a[i] != b[i])
      throw Error(ErrorCode::internal, "bench: " + what + ": aperture and MPI disagree on rank " + std::to_string(rank) + " at element " +
                  std::to_string(i) + " (" + std::to_string(a[i]) + " vs " + std::to_string(b[i]) + ")");
}

}  // namespace

std::vector<BenchRow> bench_host(Team& team, Provider& provider, const BenchOptions& options) {
  const int me = team.rank();
  const int world = team.size();
  const int right = (me + 1) % world;
  const std::vector<std::string> ops = options.ops.empty() ? kHostOps : options.ops;
  const bool with_mpi = mpi::ready();
  if (!with_mpi && me == 0)
    std::fprintf(stderr, "aperture bench: no MPI columns: %s\n", mpi::why_not().c_str());

  std::size_t max_bytes = 0;
  for (std::size_t b : options.sizes) max_bytes = std::max(max_bytes, b);
  // The collectives need every rank directly addressable: made only when a collective op is asked.
  const bool any_collective = std::any_of(ops.begin(), ops.end(), [](const std::string& op) {
    return op != "put" && op != "get" && std::find(kNodeOps.begin(), kNodeOps.end(), op) == kNodeOps.end();
  });
  Communicator::Options tuned;
  tuned.half_bytes = options.half_bytes;  // --half-bytes (0: the default)
  std::optional<Communicator> collectives;
  if (any_collective) collectives.emplace(provider, team, tuned);
  std::optional<Communicator> staged_broadcast;
  if (std::find(ops.begin(), ops.end(), "broadcast.staged") != ops.end()) {
    Communicator::Options staged = tuned;
    staged.broadcast_ll_max_bytes = 0;
    staged_broadcast.emplace(provider, team, staged);
  }
  std::optional<Communicator> zero_copy_broadcast;
  if (std::find(ops.begin(), ops.end(), "broadcast.symmetric") != ops.end()) {
    Communicator::Options zero_copy = tuned;
    zero_copy.broadcast_ll_max_bytes = 0;
    zero_copy.broadcast_direct_min_bytes = 0;
    zero_copy_broadcast.emplace(provider, team, zero_copy);
  }
  Allocation window = provider.allocate(std::max<std::size_t>(max_bytes, 64));  // put's target, get's source
  const bool any_node_op = std::any_of(ops.begin(), ops.end(), [](const std::string& op) {
    return std::find(kNodeOps.begin(), kNodeOps.end(), op) != kNodeOps.end();
  });
  if (any_node_op && with_mpi) mpi::rma_open(std::max<std::size_t>(max_bytes, 64));
  std::vector<BenchRow> rows;
  {
    for (const std::string& op : ops) {
      const bool node_op = std::find(kNodeOps.begin(), kNodeOps.end(), op) != kNodeOps.end();
      const bool path_op = std::find(kPathOps.begin(), kPathOps.end(), op) != kPathOps.end();
      if (std::find(kHostOps.begin(), kHostOps.end(), op) == kHostOps.end() && !node_op && !path_op)
        throw Error(ErrorCode::invalid_argument, "bench: unknown op '" + op + "' for host memory; ops are put, get, broadcast, all_gather, "
                    "reduce_scatter, all_reduce, all_reduce.one_shot, all_reduce.two_shot, all_to_all, barrier, "
                    "broadcast.staged (the staged broadcast at every size), broadcast.in_place, broadcast.symmetric "
                    "(root's input in a symmetric allocation: the zero-copy form at every size), all_reduce.ll (the push "
                    "path at every size), and over nodes "
                    "node_put, node_get");
      if (node_op && (team.node_count() < 2 || !window.map.engine().attached() || !with_mpi))
        throw Error(ErrorCode::unavailable,
                    "bench: " + op + " measures the engine between nodes: it needs ranks on 2 or more nodes started "
                    "by mpirun (e.g. scripts/simnodes.sh run 2 -- aperture launch --mpi --nodes 2 --hostfile "
                    "\"$SIMNODES_HOSTFILE\" -n 2 -- aperture bench --ops node_put,node_get); this job has " +
                        std::to_string(team.node_count()) + " node(s)");
      for (std::size_t bytes : options.sizes) {
        const bool blocks = op == "reduce_scatter" || op == "all_to_all";  // input: world blocks
        const std::size_t count = bytes / sizeof(float) / (blocks ? static_cast<std::size_t>(world) : 1);
        if (count == 0) continue;
        if (op == "barrier" && bytes != options.sizes.front()) continue;  // one row: it moves no data
        const std::size_t in_count = blocks ? count * world : count;
        const std::size_t out_count = op == "all_gather" || op == "all_to_all" ? count * world : count;
        std::vector<float> in(in_count), out(out_count), ref(out_count);
        fill(in, me, static_cast<int>(bytes % 97));
        BenchRow row;
        row.memory = "cpu";
        row.op = op;
        row.type = "float32";
        row.ranks = world;
        row.bytes = in_count * sizeof(float);
        std::function<void()> ours, theirs, theirs2;  // theirs2: a second baseline, where a row has one
        auto* peer_buffer = static_cast<float*>(window.ptr);
        const std::int64_t* bases = window.map.peer_bases();
        const int across = (me + world / team.node_count()) % world;  // same local index, next node
        if (op == "node_put") {
          ours = [&] { window.map.peer_view().put(peer_buffer, in.data(), count, across); };
          theirs = [&] { mpi::rma_put(in.data(), count * sizeof(float), across); };
          row.baseline = "MPI_Put+flush";
        } else if (op == "node_get") {
          ours = [&] { window.map.peer_view().get(out.data(), peer_buffer, count, across); };
          theirs = [&] { mpi::rma_get(out.data(), count * sizeof(float), across); };
          row.baseline = "MPI_Get+flush";
        } else if (op == "barrier") {
          row.bytes = 0;
          ours = [&] { collectives->barrier(); };
          if (with_mpi) theirs = [&] { mpi::barrier(); };
          row.baseline = "MPI_Barrier";
        } else if (op == "put") {
          ours = [&] { aperture::put(peer_buffer, in.data(), count, me, right, bases); };
          theirs = [&] { std::memcpy(out.data(), in.data(), count * sizeof(float)); };
          row.baseline = "memcpy";
        } else if (op == "get") {
          ours = [&] { aperture::get(out.data(), peer_buffer, count, me, right, bases); };
          theirs = [&] { std::memcpy(out.data(), in.data(), count * sizeof(float)); };
          row.baseline = "memcpy";
        } else if (op == "broadcast.in_place") {
          std::copy(in.begin(), in.end(), out.begin());  // root's source is its out
          ours = [&] { collectives->broadcast(out.data(), out.data(), count, 0); };
          std::copy(in.begin(), in.end(), ref.begin());
          if (with_mpi) theirs = [&] { mpi::bcast(ref.data(), count, 0); };
          row.baseline = "MPI_Bcast";
        } else if (op == "broadcast.symmetric") {
          team.barrier();  // no neighbour still reads or writes this rank's window (put, get)
          std::copy(in.begin(), in.end(), peer_buffer);  // only root's is read
          team.barrier();
          ours = [&] { zero_copy_broadcast->broadcast(peer_buffer, window.map, out.data(), count, DataType::float32, 0); };
          std::copy(in.begin(), in.end(), ref.begin());
          if (with_mpi) theirs = [&] { mpi::bcast(ref.data(), count, 0); };
          row.baseline = "MPI_Bcast";
        } else if (op == "broadcast" || op == "broadcast.staged") {
          Communicator& comm = op == "broadcast" ? *collectives : *staged_broadcast;
          ours = [&] { comm.broadcast(in.data(), out.data(), count, 0); };
          std::copy(in.begin(), in.end(), ref.begin());  // MPI_Bcast is in place: root's ref is the source
          if (with_mpi) theirs = [&] { mpi::bcast(ref.data(), count, 0); };
          row.baseline = "MPI_Bcast";
          // What an MPI user writes for the same out-of-place call: root copies in to out, then
          // broadcasts out. MPI_Bcast alone stays the first baseline (the plots' ratio takes the
          // faster one), so this column only shows what the root's copy itself costs.
          if (with_mpi) {
            theirs2 = [&] {
              if (me == 0) std::memcpy(ref.data(), in.data(), count * sizeof(float));
              mpi::bcast(ref.data(), count, 0);
            };
            row.baseline2 = "memcpy+MPI_Bcast";
          }
        } else if (op == "all_gather") {
          ours = [&] { collectives->all_gather(in.data(), out.data(), count); };
          if (with_mpi) theirs = [&] { mpi::allgather(in.data(), ref.data(), count); };
          row.baseline = "MPI_Allgather";
        } else if (op == "reduce_scatter") {
          ours = [&] { collectives->reduce_scatter(in.data(), out.data(), count, ReduceOp::sum); };
          if (with_mpi) theirs = [&] { mpi::reduce_scatter_block(in.data(), ref.data(), count); };
          row.baseline = "MPI_Reduce_scatter_block";
        } else if (op.rfind("all_reduce", 0) == 0) {
          const AllReduceAlgorithm algo = op == "all_reduce.one_shot"   ? AllReduceAlgorithm::one_shot
                                          : op == "all_reduce.two_shot" ? AllReduceAlgorithm::two_shot
                                          : op == "all_reduce.ll"       ? AllReduceAlgorithm::ll
                                                                        : AllReduceAlgorithm::automatic;
          ours = [&, algo] { collectives->all_reduce(in.data(), out.data(), count, ReduceOp::sum, algo); };
          if (with_mpi) theirs = [&] { mpi::allreduce(in.data(), ref.data(), count); };
          row.baseline = "MPI_Allreduce";
        } else {  // all_to_all
          ours = [&] { collectives->all_to_all(in.data(), out.data(), count); };
          if (with_mpi) theirs = [&] { mpi::alltoall(in.data(), ref.data(), count); };
          row.baseline = "MPI_Alltoall";
        }
        if (node_op) {
          // Check the path once before timing it: put `in` across, then the rank across holds
          // it, and a get from it brings this rank's own `in` back.
          window.map.peer_view().put(peer_buffer, in.data(), count, across);
          team.barrier();
          std::vector<float> sent(count);
          fill(sent, (me - world / team.node_count() + world) % world, static_cast<int>(bytes % 97));
          std::vector<float> held(peer_buffer, peer_buffer + count);
          expect_same(held, sent, count, "node_put at " + std::to_string(row.bytes) + " bytes", me);
          team.barrier();
          window.map.peer_view().get(out.data(), peer_buffer, count, across);
          expect_same(out, in, count, "node_get at " + std::to_string(row.bytes) + " bytes", me);
          team.barrier();
        }
        if (node_op) {
          row.baseline2 = "MPI_Sendrecv";
          theirs2 = [&] { mpi::sendrecv(in.data(), ref.data(), count * sizeof(float), across); };
        }
        // aperture and its baselines in alternating trials: whatever else the machine (or, between
        // nodes, the link) is doing during the run weighs on each side alike.
        std::vector<std::function<void()>> sides{ours};
        if (theirs) sides.push_back(theirs);
        if (theirs2) sides.push_back(theirs2);
        const std::vector<Timed> timed = time_interleaved(team, options, sides);
        row.aperture_us = timed[0].us;
        row.iters = timed[0].iters;
        if (theirs) row.baseline_us = timed[1].us;
        if (theirs2) row.baseline2_us = timed.back().us;
        if (theirs) {
          if (row.baseline.rfind("MPI", 0) == 0 && op != "barrier" && !node_op) {
            ours();  // one more of each on the same input: the answers agree
            theirs();
            expect_same(out, ref, out_count, op + " at " + std::to_string(row.bytes) + " bytes", me);
          }
        } else {
          row.baseline = "-";
        }
        rows.push_back(row);
      }
    }
  }
  team.barrier();  // nobody frees the window while a neighbour still puts into it
  if (any_node_op && with_mpi) mpi::rma_close();
  provider.free(window);
  return rows;
}

}  // namespace aperture::bench
