// tests/multinode/collectives_nodes_test.cpp [SHAPE] — every collective, element type and
// reduction of aperture::Communicator on a team that spans nodes (the hierarchical algorithms,
// src/collectives/hierarchical.h), every element of every result checked bit for bit.
//
// Run under mpirun (aperture launch --mpi), split by APERTURE_NODES or on simulated nodes. SHAPE
// "3+1" (ranks per node) names each rank's node itself before the Team forms (APERTURE_NODE), for
// uneven nodes on one machine.
//
// The expected values are computed on every rank for every other rank's input without the
// library's code (tests/collectives/element_reference.h): a reduction folds each node's ranks in
// rank order, then the nodes' results in node order (docs/MULTINODE.md). Sizes are picked to run
// each path once: the whole-vector all_reduce (up to 32 KiB) and the sharded one (above, with a
// count that does not divide by the node's ranks), and every other collective at one size.
//
// Built a second time with CUDA (multinode_collectives_gpu_test, APERTURE_TEST_GPU): the buffers
// are then GPU memory of device 0 and the provider APERTURE_GPU_PROVIDER (default cuda-ipc), for
// the GPU machine (two ranks on one GPU as two nodes).
//
// APERTURE_TEST_EXPECT_BETWEEN_NODES=nccl or mpi: fail unless Communicator::between_nodes() says so
// (the run forced to a path proves that path ran).
#include <aperture/aperture.h>
#include <aperture/collectives/collectives.h>
#include <aperture/collectives/detail/tuning.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "../collectives/element_reference.h"
#include "../common/test_seed.h"

#if defined(APERTURE_TEST_GPU)
#  include <cuda_runtime.h>
#endif

namespace {

using aperture::DataType;
using aperture::ReduceOp;

struct Buffer {
  DataType type;
  std::vector<unsigned char> bytes;
  Buffer(DataType t, std::uint64_t count) : type(t), bytes(count * aperture::size_of(t) + 1, 0x5a) {}
  void* data() { return bytes.data(); }
  void set(std::uint64_t i, std::uint64_t bits) { std::memcpy(&bytes[i * aperture::size_of(type)], &bits, aperture::size_of(type)); }
  std::uint64_t get(std::uint64_t i) const {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &bytes[i * aperture::size_of(type)], aperture::size_of(type));
    return bits;
  }
};

struct Checker {
  explicit Checker(aperture::Team& t) : team(t) {}
  aperture::Team& team;
  std::uint64_t seed = 0;
  std::uint64_t checks = 0, failures = 0;
  std::vector<std::vector<int>> nodes;  // ranks of each node, in node order

  std::uint64_t bits_of(DataType t, ReduceOp op, int rank, std::uint64_t salt, std::uint64_t i) const {
    return reference::element(t, op, test::draw(seed, rank, salt, i));
  }
  Buffer input(DataType t, ReduceOp op, std::uint64_t salt, std::uint64_t count) const {
    Buffer b(t, count);
    for (std::uint64_t i = 0; i < count; ++i) b.set(i, bits_of(t, op, team.rank(), salt, i));
    return b;
  }
  // The hierarchical fold of element `at` of every rank's buffer `salt`: each node's ranks in rank
  // order (avg on floats: every input scaled by 1 / team size first), then the nodes in node order.
  std::uint64_t expected(DataType t, ReduceOp op, std::uint64_t salt, std::uint64_t at) const {
    const int world = team.size();
    const ReduceOp fold_op = op == ReduceOp::avg ? ReduceOp::sum : op;
    std::uint64_t total = 0;
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      std::uint64_t acc = 0;
      for (std::size_t k = 0; k < nodes[n].size(); ++k) {
        const std::uint64_t x = reference::pre_scale(t, op, bits_of(t, op, nodes[n][k], salt, at), world);
        acc = k == 0 ? x : reference::combine(t, fold_op, acc, x);
      }
      total = n == 0 ? acc : reference::combine(t, fold_op, total, acc);
    }
    if (op == ReduceOp::avg && !aperture::is_floating(t)) {
      if (reference::is_signed_integer(t)) return static_cast<std::uint64_t>(reference::as_signed(t, total) / world) & reference::mask(t);
      return (total & reference::mask(t)) / static_cast<std::uint64_t>(world);
    }
    return total & reference::mask(t);
  }
  void check(const Buffer& got, std::uint64_t count, const std::string& what, const std::function<std::uint64_t(std::uint64_t)>& want) {
    std::uint64_t wrong = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::uint64_t e = want(i), g = got.get(i);
      ++checks;
      if (g != e && wrong++ == 0)
        std::printf("FAIL rank %d: %s: element %" PRIu64 ": bits %#" PRIx64 ", expected %#" PRIx64 "\n", team.rank(), what.c_str(), i, g, e);
    }
    if (got.bytes.back() != 0x5a) {
      ++wrong;
      std::printf("FAIL rank %d: %s: wrote past the end\n", team.rank(), what.c_str());
    }
    if (wrong != 0) {
      ++failures;
      std::printf("FAIL rank %d: %s: %" PRIu64 " of %" PRIu64 " elements wrong\n", team.rank(), what.c_str(), wrong, count);
    }
  }
};

// Where a call's buffers live: the host Buffer itself, or (GPU build) a device copy made before the
// call and copied back after it.
struct Place {
  explicit Place(bool on_gpu) : gpu(on_gpu) {}
  Place(const Place&) = delete;
  Place& operator=(const Place&) = delete;
  bool gpu;
  std::vector<void*> owned;
  ~Place() {
#if defined(APERTURE_TEST_GPU)
    for (void* p : owned) cudaFree(p);
#endif
  }
  void* on(Buffer& b) {
    if (!gpu) return b.data();
#if defined(APERTURE_TEST_GPU)
    void* d = nullptr;
    if (cudaMalloc(&d, b.bytes.size()) != cudaSuccess || cudaMemcpy(d, b.data(), b.bytes.size(), cudaMemcpyHostToDevice) != cudaSuccess)
      throw std::runtime_error("cudaMalloc/cudaMemcpy failed");
    owned.push_back(d);
    return d;
#else
    return nullptr;
#endif
  }
  void back(Buffer& b, void* d) {
    if (!gpu) return;
#if defined(APERTURE_TEST_GPU)
    if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpy(b.data(), d, b.bytes.size(), cudaMemcpyDeviceToHost) != cudaSuccess)
      throw std::runtime_error("cudaMemcpy back failed");
#else
    (void)b, (void)d;
#endif
  }
};

std::string name(DataType t, ReduceOp op) { return std::string(aperture::name_of(t)) + " " + aperture::name_of(op); }

}  // namespace

int main(int argc, char** argv) {
  // "3+1": this rank's node from its MPI rank, before the Team reads APERTURE_NODE.
  if (argc > 1) {
    const char* world_rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (world_rank == nullptr) {
      std::printf("FAIL: a shape needs mpirun (OMPI_COMM_WORLD_RANK)\n");
      return 1;
    }
    int rank = std::atoi(world_rank), node = 0, first = 0;
    for (const char* p = argv[1]; *p != '\0'; ++node) {
      char* end = nullptr;
      first += static_cast<int>(std::strtol(p, &end, 10));
      if (rank < first) break;
      p = *end == '+' ? end + 1 : end;
    }
    const std::string value = "shape-node-" + std::to_string(node);
    setenv("APERTURE_NODE", value.c_str(), 1);
  }
  try {
    aperture::Team team = aperture::Team::from_env();
    Checker c(team);
    c.nodes.resize(static_cast<std::size_t>(team.node_count()));
    for (int r = 0; r < team.size(); ++r) c.nodes[static_cast<std::size_t>(team.node_of(r))].push_back(r);
    if (team.node_count() < 2) {
      std::printf("FAIL rank %d: the team is on one node; run it over several\n", team.rank());
      return 1;
    }
    const std::uint64_t seed = test::agreed_seed(team);
    c.seed = seed;
    if (team.rank() == 0) {
      std::string shape;
      for (const auto& n : c.nodes) shape += (shape.empty() ? std::string() : std::string("+")) + std::to_string(n.size());
      std::printf("collectives across nodes: %d ranks as %s, seed %#" PRIx64 " (APERTURE_TEST_SEED replays it)\n", team.size(),
                  shape.c_str(), seed);
    }
#if defined(APERTURE_TEST_GPU)
    const char* gpu_provider = std::getenv("APERTURE_GPU_PROVIDER");
    if (cudaSetDevice(0) != cudaSuccess) throw std::runtime_error("cudaSetDevice(0) failed");
    auto provider = aperture::make_provider(gpu_provider != nullptr ? gpu_provider : "cuda-ipc", team);
    const bool gpu = true;
#else
    auto provider = aperture::make_provider("shm", team);
    const bool gpu = false;
#endif
    aperture::Communicator comm(*provider, team);
    const int world = team.size(), me = team.rank();
    // The path between nodes the run must take (APERTURE_COLLECTIVES_BETWEEN_NODES decides it;
    // a run meant for NCCL fails here rather than pass on MPI).
    if (team.rank() == 0) std::printf("between nodes: %s\n", std::string(comm.between_nodes()).c_str());
    if (const char* want = std::getenv("APERTURE_TEST_EXPECT_BETWEEN_NODES"); want != nullptr && comm.between_nodes() != want) {
      std::printf("FAIL rank %d: the exchange between nodes runs on '%s', the test expects '%s'\n", me,
                  std::string(comm.between_nodes()).c_str(), want);
      return 1;
    }
    std::uint64_t salt = 0;

    for (int round = 0; round < 3; ++round) comm.barrier();
    int type_index = 0;
    for (DataType t : aperture::kAllDataTypes) {
      const std::size_t s = aperture::size_of(t);
      // The sharded path for sum and one other reduction per type, in turn (each 3 times over the
      // 12 types): every reduction and type pass through it without 60 large calls.
      const ReduceOp sharded_too = aperture::kAllReduceOps[1 + type_index++ % 4];
      // all_reduce: the whole-vector path and the sharded one (a count the node's ranks do not divide).
      const std::uint64_t large = aperture::collectives::tuning::kNodesWholeVectorMaxBytes / s + 5;
      for (ReduceOp op : aperture::kAllReduceOps) {
        // sum's large count divides by every node size here (shards without padding), the other's not.
        const std::uint64_t large_count = op == ReduceOp::sum ? (large + 7) / 8 * 8 : large;
        for (std::uint64_t count : {std::uint64_t{7}, large_count}) {
          if (count == large_count && op != ReduceOp::sum && op != sharded_too) continue;
          const std::uint64_t k = ++salt;
          Buffer in = c.input(t, op, k, count), out(t, count);
          Place p(gpu);
          void* d_out = p.on(out);
          comm.all_reduce(p.on(in), d_out, count, t, op);
          p.back(out, d_out);
          c.check(out, count, "all_reduce " + name(t, op) + " x" + std::to_string(count), [&](std::uint64_t i) { return c.expected(t, op, k, i); });
        }
        // in place
        const std::uint64_t k = ++salt, count = 33;
        Buffer io = c.input(t, op, k, count);
        Place p(gpu);
        void* d_io = p.on(io);
        comm.all_reduce(d_io, d_io, count, t, op);
        p.back(io, d_io);
        c.check(io, count, "all_reduce in place " + name(t, op), [&](std::uint64_t i) { return c.expected(t, op, k, i); });
        // reduce_scatter
        const std::uint64_t k2 = ++salt, per = 61;
        Buffer rin = c.input(t, op, k2, per * world), rout(t, per);
        Place p2(gpu);
        void* d_rout = p2.on(rout);
        comm.reduce_scatter(p2.on(rin), d_rout, per, t, op);
        p2.back(rout, d_rout);
        c.check(rout, per, "reduce_scatter " + name(t, op), [&](std::uint64_t i) { return c.expected(t, op, k2, me * per + i); });
      }
      // The data movers depend on the element's size only: every type once.
      {
        const std::uint64_t k = ++salt, count = 129;
        Buffer in = c.input(t, ReduceOp::sum, k, count), out(t, count * world);
        Place p(gpu);
        void* d_out = p.on(out);
        comm.all_gather(p.on(in), d_out, count, t);
        p.back(out, d_out);
        c.check(out, count * world, std::string("all_gather ") + aperture::name_of(t),
                [&](std::uint64_t i) { return c.bits_of(t, ReduceOp::sum, static_cast<int>(i / count), k, i % count); });
      }
      for (int root : {0, world - 1, world / 2}) {
        const std::uint64_t k = ++salt, count = 257;
        Buffer in = c.input(t, ReduceOp::sum, k, count), out(t, count);
        Place p(gpu);
        void* d_out = p.on(out);
        comm.broadcast(p.on(in), d_out, count, t, root);
        p.back(out, d_out);
        c.check(out, count, std::string("broadcast ") + aperture::name_of(t) + " root " + std::to_string(root),
                [&](std::uint64_t i) { return c.bits_of(t, ReduceOp::sum, root, k, i); });
      }
      {
        const std::uint64_t k = ++salt, count = 33;
        Buffer in = c.input(t, ReduceOp::sum, k, count * world), out(t, count * world);
        Place p(gpu);
        void* d_out = p.on(out);
        comm.all_to_all(p.on(in), d_out, count, t);
        p.back(out, d_out);
        c.check(out, count * world, std::string("all_to_all ") + aperture::name_of(t), [&](std::uint64_t i) {
          return c.bits_of(t, ReduceOp::sum, static_cast<int>(i / count), k, static_cast<std::uint64_t>(me) * count + i % count);
        });
      }
    }
#if defined(APERTURE_TEST_GPU)
    // CUDA graphs (docs/MULTINODE.md): on the NCCL path an all_reduce captured once and replayed
    // with new inputs gives each replay's sums; on the MPI path the all_reduce, and the barrier on
    // either path, throw `unavailable` on a stream being captured, on every rank alike.
    {
      const auto cuda = [](cudaError_t e, const char* what) {
        if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
      };
      const std::uint64_t count = 1000;
      const std::size_t bytes = count * aperture::size_of(DataType::float32);
      cudaStream_t stream = nullptr;
      cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
      void *d_in = nullptr, *d_out = nullptr;
      cuda(cudaMalloc(&d_in, bytes), "cudaMalloc");
      cuda(cudaMalloc(&d_out, bytes), "cudaMalloc");
      comm.all_reduce(d_in, d_out, count, DataType::float32, ReduceOp::sum, aperture::AllReduceAlgorithm::automatic,
                      stream);  // the first call makes NCCL's communicators and the staging
      cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      const auto refused = [&](const char* what, const std::function<void()>& call) {
        cudaGraph_t partial = nullptr;
        cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
        bool unavailable = false;
        try {
          call();
        } catch (const aperture::Error& e) {
          unavailable = e.code() == aperture::ErrorCode::unavailable;
          if (!unavailable) std::printf("FAIL rank %d: %s under capture threw %s\n", me, what, e.what());
        }
        cudaStreamEndCapture(stream, &partial);  // what was queued before the refusal, discarded
        if (partial != nullptr) cudaGraphDestroy(partial);
        (void)cudaGetLastError();
        ++c.checks;
        if (!unavailable) {
          ++c.failures;
          std::printf("FAIL rank %d: %s on a capturing stream was not refused as unavailable\n", me, what);
        }
      };
      refused("barrier", [&] { comm.barrier(stream); });
      if (comm.between_nodes() == "nccl") {
        cudaGraph_t graph = nullptr;
        cudaGraphExec_t exec = nullptr;
        cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
        comm.all_reduce(d_in, d_out, count, DataType::float32, ReduceOp::sum, aperture::AllReduceAlgorithm::automatic,
                        stream);
        cuda(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
        cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
        for (int replay = 0; replay < 3; ++replay) {
          const std::uint64_t k = ++salt;
          Buffer in = c.input(DataType::float32, ReduceOp::sum, k, count), out(DataType::float32, count);
          cuda(cudaMemcpy(d_in, in.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
          cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
          cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
          cuda(cudaMemcpy(out.data(), d_out, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
          c.check(out, count, "all_reduce float32 sum, graph replay " + std::to_string(replay),
                  [&](std::uint64_t i) { return c.expected(DataType::float32, ReduceOp::sum, k, i); });
        }
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
      } else {
        refused("all_reduce (MPI between nodes)", [&] {
          comm.all_reduce(d_in, d_out, count, DataType::float32, ReduceOp::sum, aperture::AllReduceAlgorithm::automatic,
                          stream);
        });
      }
      cudaFree(d_in);
      cudaFree(d_out);
      cudaStreamDestroy(stream);
    }
#endif
    comm.barrier();
    if (gpu) comm.check();
    std::vector<std::uint64_t> all(static_cast<std::size_t>(world));
    team.allgather(&c.failures, all.data(), sizeof c.failures);
    std::uint64_t failures = 0;
    for (std::uint64_t f : all) failures += f;
    if (failures != 0) {
      std::printf("FAIL rank %d: %" PRIu64 " failed checks over the team\n", me, failures);
      return 1;
    }
    std::printf("PASS collectives across nodes (rank %d of %d, node %d): %" PRIu64 " checks\n", me, world, team.node(), c.checks);
    return 0;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
