// tools/bench_device.cu — `aperture bench` on GPU memory: one rank's measurements.
//
// put/get: a grid of blocks moves `bytes` to (from) the right neighbour's copy of a symmetric
// buffer with group_put/group_get (16-byte vectors), against the copy engine moving the same
// bytes through the same mapping (cudaMemcpyAsync on the translated pointer). The collectives
// run on an aperture::Communicator (bfloat16 sums for the reductions, as the NCCL yardsticks in
// DESIGN.md); NCCL columns come later, so their baseline is "-" for now.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench.h"

#include "aperture/collectives/bulk.h"
#include "aperture/collectives/communicator.h"
#include "aperture/collectives/group.h"
#include "aperture/error.h"
#include "aperture/provider.h"
#include "aperture/team.h"

namespace aperture::cli {

namespace {

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw Error(std::string("bench: ") + call + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

constexpr int kPutBlocks = 132;
constexpr int kPutThreads = 512;

__device__ inline std::uint64_t smaller(std::uint64_t a, std::uint64_t b) { return a < b ? a : b; }

// Block b moves the b-th slice; every block is a Group of its own.
__global__ void put_kernel(PeerView peers, unsigned char* dst, const unsigned char* src, std::uint64_t bytes, int to_rank) {
  const std::uint64_t share = (bytes / gridDim.x + 15) / 16 * 16;
  const std::uint64_t begin = smaller(share * blockIdx.x, bytes);
  const std::uint64_t end = smaller(begin + share, bytes);
  collectives::group_put(collectives::BlockGroup{}, dst + begin, src + begin, end - begin, peers.rank, to_rank,
                         peers.peer_bases);
}
__global__ void get_kernel(PeerView peers, unsigned char* dst, const unsigned char* src, std::uint64_t bytes, int from_rank) {
  const std::uint64_t share = (bytes / gridDim.x + 15) / 16 * 16;
  const std::uint64_t begin = smaller(share * blockIdx.x, bytes);
  const std::uint64_t end = smaller(begin + share, bytes);
  collectives::group_get(collectives::BlockGroup{}, dst + begin, src + begin, end - begin, peers.rank, from_rank,
                         peers.peer_bases);
}

const std::vector<std::string> kDeviceOps = {"barrier", "put", "get", "broadcast", "all_gather", "reduce_scatter", "all_reduce",
                                             "all_reduce.one_shot", "all_reduce.two_shot", "all_to_all"};

}  // namespace

std::vector<BenchRow> bench_device(Team& team, Provider& provider, const BenchOptions& options) {
  const int me = team.rank();
  const int world = team.size();
  const int right = (me + 1) % world;
  const std::vector<std::string> ops = options.ops.empty() ? kDeviceOps : options.ops;
  std::size_t max_bytes = 0;
  for (std::size_t b : options.sizes) max_bytes = std::max(max_bytes, b);

  Communicator comm(provider, team);  // selects the provider's device
  Allocation window = provider.allocate(std::max<std::size_t>(max_bytes, 256));
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const auto finish = [&] { check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); };
  std::vector<BenchRow> rows;
  for (const std::string& op : ops) {
    if (std::find(kDeviceOps.begin(), kDeviceOps.end(), op) == kDeviceOps.end())
      throw Error("bench: unknown op '" + op + "' for GPU memory; ops are put, get, broadcast, all_gather, "
                  "reduce_scatter, all_reduce, all_reduce.one_shot, all_reduce.two_shot, all_to_all, barrier");
    const bool reduces = op == "reduce_scatter" || op.rfind("all_reduce", 0) == 0;
    const std::size_t esize = reduces ? 2 : 4;  // bfloat16 reductions, float32 otherwise
    for (std::size_t bytes : options.sizes) {
      const bool blocks = op == "reduce_scatter" || op == "all_to_all";
      const std::size_t count = bytes / esize / (blocks ? static_cast<std::size_t>(world) : 1);
      if (count == 0) continue;
      if (op == "barrier" && bytes != options.sizes.front()) continue;  // one row: it moves no data
      const std::size_t in_count = blocks ? count * world : count;
      const std::size_t out_count = op == "all_gather" || op == "all_to_all" ? count * world : count;
      void* in = nullptr;
      void* out = nullptr;
      check_cuda(cudaMalloc(&in, in_count * esize), "cudaMalloc(in)");
      check_cuda(cudaMalloc(&out, out_count * esize), "cudaMalloc(out)");
      check_cuda(cudaMemset(in, 0, in_count * esize), "cudaMemset(in)");
      check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // the legacy stream's memset, before `stream` uses it
      BenchRow row;
      row.memory = "gpu";
      row.op = op;
      row.type = reduces ? "bfloat16" : "float32";
      row.ranks = world;
      row.bytes = in_count * esize;
      std::function<void()> ours, theirs;
      auto* peer_window = static_cast<unsigned char*>(window.ptr);
      const PeerView peers = window.map.peer_view();
      unsigned char* remote = translate(peer_window, me, right, window.map.host_peer_bases().data());
      const std::size_t n = count * esize;
      if (op == "barrier") {
        row.bytes = 0;
        ours = [&] { comm.barrier(stream); };
      } else if (op == "put") {
        ours = [&] { put_kernel<<<kPutBlocks, kPutThreads, 0, stream>>>(peers, peer_window, static_cast<unsigned char*>(in), n, right); };
        theirs = [&] { check_cuda(cudaMemcpyAsync(remote, in, n, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync(put)"); };
        row.baseline = "copy engine";
      } else if (op == "get") {
        ours = [&] { get_kernel<<<kPutBlocks, kPutThreads, 0, stream>>>(peers, static_cast<unsigned char*>(out), peer_window, n, right); };
        theirs = [&] { check_cuda(cudaMemcpyAsync(out, remote, n, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync(get)"); };
        row.baseline = "copy engine";
      } else if (op == "broadcast") {
        ours = [&] { comm.broadcast(in, out, count, DataType::float32, 0, stream); };
      } else if (op == "all_gather") {
        ours = [&] { comm.all_gather(in, out, count, DataType::float32, stream); };
      } else if (op == "reduce_scatter") {
        ours = [&] { comm.reduce_scatter(in, out, count, DataType::bfloat16, ReduceOp::sum, stream); };
      } else if (op == "all_to_all") {
        ours = [&] { comm.all_to_all(in, out, count, DataType::float32, stream); };
      } else {
        const AllReduceAlgorithm algo = op == "all_reduce.one_shot"   ? AllReduceAlgorithm::one_shot
                                        : op == "all_reduce.two_shot" ? AllReduceAlgorithm::two_shot
                                                                      : AllReduceAlgorithm::automatic;
        ours = [&, algo] { comm.all_reduce(in, out, count, DataType::bfloat16, ReduceOp::sum, algo, stream); };
      }
      team.barrier();  // the window is not reused before every rank is done with the last size
      const Timed a = time_calls(team, options, ours, finish);
      row.aperture_us = a.us;
      row.iters = a.iters;
      if (theirs) {
        row.baseline_us = time_calls(team, options, theirs, finish).us;
      } else {
        row.baseline = "-";
      }
      check_cuda(cudaGetLastError(), "a bench kernel launch");
      comm.check(stream);
      rows.push_back(row);
      cudaFree(in);
      cudaFree(out);
    }
  }
  team.barrier();
  check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
  provider.free(window);
  return rows;
}

}  // namespace aperture::cli
