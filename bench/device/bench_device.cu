// bench/device/bench_device.cu — `aperture bench` on GPU memory: one rank's measurements.
//
// put/get: a grid of blocks moves `bytes` to (from) the right neighbour's copy of a symmetric
// buffer with aperture::put/get on a CoopGrid (translated through the peer table, 16-byte
// vectors), against the same kernel given the raw peer pointer (the cost of translation) and the
// copy engine moving the same bytes through the same mapping. ping_pong: one-way latency of a signal /
// wait_until_ge round trip between ranks 0 and 1, against the same loop on raw peer pointers
// (st.release.sys / ld.acquire.sys spin). The collectives run on an aperture::Communicator
// (bfloat16 and float32 sums for the reductions) against NCCL in the same processes: on the
// same cudaMalloc buffers, and on NCCL symmetric windows (ncclMemAlloc +
// ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC)). All-to-all on NCCL is grouped
// ncclSend/ncclRecv. NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
//
// Every collective side is timed the same way: a CUDA graph of several captured calls, launched
// back to back (time_captured), median of trials.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#if APERTURE_BENCH_WITH_NCCL
#include <nccl.h>
#endif

#include "bench.h"
#include "device/bench_device.h"

#include "aperture/bulk.h"
#include "aperture/collectives/communicator.h"
#include "aperture/coop.h"
#include "aperture/coop_rma.h"
#include "aperture/error.h"
#include "aperture/provider.h"
#include "aperture/signal.h"
#include "aperture/team.h"
#include "common/cuda_check.h"
#if APERTURE_BENCH_WITH_NCCL
#include "common/nccl_check.h"
#endif

namespace aperture::bench {

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    detail::throw_call_failure(detail::cuda_error_code(status), call,
                               detail::call_failure_text(call, detail::cuda_error_text(status)), "bench");
}

namespace {

#if APERTURE_BENCH_WITH_NCCL
void check_nccl(ncclResult_t status, const char* call) {
  if (status != ncclSuccess)
    detail::throw_call_failure(detail::nccl_error_code(status), call,
                               detail::nccl_failure(status, call) + " (NCCL_DEBUG=WARN says more)", "bench");
}
#endif

constexpr int kPutBlocks = 132;
constexpr int kPutThreads = 512;
constexpr int kPingPongRounds = 2000;  // round trips per launch

// The whole grid is one group (aperture::CoopGrid): neighbouring threads take neighbouring
// vectors across the buffer, which NVLink serves faster than one slice per block.
__global__ void put_kernel(PeerView peers, unsigned char* dst, const unsigned char* src, std::uint64_t bytes, int to_rank) {
  aperture::put(CoopGrid{}, dst, src, bytes, peers.rank, to_rank, peers.peer_bases);
}
__global__ void get_kernel(PeerView peers, unsigned char* dst, const unsigned char* src, std::uint64_t bytes, int from_rank) {
  aperture::get(CoopGrid{}, dst, src, bytes, peers.rank, from_rank, peers.peer_bases);
}
// The same kernel on pointers translated once on the host (what a user with raw IPC pointers
// writes): put and get both become this copy; the difference to the above is the translation.
__global__ void raw_copy_kernel(unsigned char* dst, const unsigned char* src, std::uint64_t bytes) {
  aperture::copy(CoopGrid{}, dst, src, bytes);
}

// How a ping-pong side sends: aperture with the partner's flag translated once before the loop
// (PeerView::translate, then signal_translated: how a latency-bound loop is written), aperture's
// signal() translating in every round, or a raw release store to the address the host translated.
enum class PingPong { translated_once, translated_per_round, raw };

// One thread of ranks 0 and 1: `rounds` round trips, values base+1 .. base+rounds. The waits are
// aperture's wait_until_ge_for, or (raw) acquire loads spun on; both are bounded (a few seconds)
// so a broken setup ends the bench instead of hanging it.
template <PingPong Mode>
__global__ void ping_pong_kernel(PeerView peers, std::uint64_t* flag, std::uint64_t* partner_flag, int partner,
                                 std::uint64_t base, int rounds) {
  const bool first = peers.rank < partner;
  std::uint64_t* const target = Mode == PingPong::translated_once ? peers.translate(flag, partner) : partner_flag;
  const auto send = [&](std::uint64_t v) {
    if constexpr (Mode == PingPong::translated_once) aperture::signal_translated(target, v);
    if constexpr (Mode == PingPong::translated_per_round) peers.signal(flag, v, partner);
    if constexpr (Mode == PingPong::raw) asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(target), "l"(v) : "memory");
  };
  const auto wait = [&](std::uint64_t v) {
    if constexpr (Mode == PingPong::raw) {
      std::uint64_t seen = 0;
      unsigned spins = 0;
      do {
        asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(seen) : "l"(flag) : "memory");
      } while (seen < v && ++spins < (1u << 23));
    } else {
      aperture::wait_until_ge_for(flag, v, 4000000000ull, nullptr);  // wait_until_ge, with a bound
    }
  };
  for (int i = 1; i <= rounds; ++i) {
    const std::uint64_t v = base + static_cast<std::uint64_t>(i);
    if (first) {
      send(v);
      wait(v);
    } else {
      wait(v);
      send(v);
    }
  }
}

// ping_pong last: its waits are the only ones here that can stall a broken setup for seconds.
const std::vector<std::string> kDeviceOps = {"barrier", "put", "get", "broadcast", "all_gather",
                                             "reduce_scatter", "all_reduce", "all_to_all", "ping_pong"};
// On request: each algorithm on its own (.staged: the barrier-based path at sizes where the
// automatic choice would push, from a second Communicator with Options::ll_max_bytes = 0;
// .symmetric: the input allocated from the provider and passed with its map, so the zero-copy
// forms read it in place; broadcast.symmetric takes the zero-copy broadcast at every size, from a
// Communicator with Options::broadcast_direct_min_bytes = 0, to find where it overtakes the
// default one).
const std::vector<std::string> kMoreDeviceOps = {"all_reduce.one_shot", "all_reduce.two_shot", "all_reduce.ll",
                                                 "all_gather.staged", "reduce_scatter.staged", "ping_pong.table",
                                                 "all_gather.symmetric", "reduce_scatter.symmetric",
                                                 "all_reduce.symmetric", "all_reduce.two_shot.symmetric",
                                                 "all_to_all.symmetric", "broadcast.symmetric", "ag_gemm",
                                                 "gemm_rs", "bulk_put", "bulk_get"};

#if APERTURE_BENCH_WITH_NCCL
// Why NCCL cannot run over these ranks, or "" when it can: NCCL refuses two ranks on one GPU
// (ncclCommInitRank: "invalid usage"), so where ranks share a GPU its baselines are skipped and
// aperture's rows still run. Every rank gets the same answer (the devices' UUIDs are gathered).
std::string nccl_unusable_reason(Team& team) {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  std::vector<cudaUUID_t> uuids(static_cast<std::size_t>(team.size()));
  team.allgather(&properties.uuid, uuids.data(), sizeof(cudaUUID_t));
  for (int a = 0; a < team.size(); ++a)
    for (int b = a + 1; b < team.size(); ++b)
      if (std::memcmp(&uuids[a], &uuids[b], sizeof(cudaUUID_t)) == 0)
        return "ranks " + std::to_string(a) + " and " + std::to_string(b) +
               " share one GPU, and NCCL refuses two ranks on one GPU (ncclCommInitRank: invalid usage); "
               "aperture's rows still run";
  return "";
}

ncclDataType_t nccl_type(DataType t) { return t == DataType::bfloat16 ? ncclBfloat16 : ncclFloat32; }
#endif

}  // namespace

// Times `call` as every collective side is timed: `calls` captured into one CUDA graph (chosen
// so a graph lasts about half a millisecond, from an eager estimate), launched back to back by
// time_calls; the figure is per call.
Timed time_captured(Team& team, const BenchOptions& options, cudaStream_t stream, const std::function<void()>& call) {
  const auto finish = [&] { check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); };
  call();  // warm-up: first touches, NCCL's lazy connections
  call();
  finish();
  team.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) call();
  finish();
  double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 3;
  std::vector<double> all(static_cast<std::size_t>(team.size()));
  team.allgather(&mine, all.data(), sizeof mine);
  const double estimate = *std::max_element(all.begin(), all.end());
  const int calls = static_cast<int>(std::clamp(0.5e-3 / std::max(estimate, 1e-9), 1.0, 64.0));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
  for (int i = 0; i < calls; ++i) call();
  check_cuda(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  Timed t = time_calls(team, options, [&] { check_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch"); }, finish);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  t.us /= calls;
  t.iters *= calls;
  return t;
}

std::vector<BenchRow> bench_device(Team& team, Provider& provider, const BenchOptions& options) {
  const int me = team.rank();
  const int world = team.size();
  const int right = (me + 1) % world;
  const std::vector<std::string> ops = options.ops.empty() ? kDeviceOps : options.ops;
  std::size_t max_bytes = 0;
  for (std::size_t b : options.sizes) max_bytes = std::max(max_bytes, b);

  Communicator::Options tuning;
  tuning.max_parts = options.max_parts;
  tuning.half_bytes = options.half_bytes;
  tuning.ll_part_bytes = options.ll_part_bytes;
  Communicator comm(provider, team, tuning);  // selects the provider's device
  std::unique_ptr<Communicator> staged;       // for the .staged ops
  for (const std::string& op : ops)
    if (op.size() > 7 && op.compare(op.size() - 7, 7, ".staged") == 0 && !staged) {
      Communicator::Options no_ll = tuning;
      no_ll.ll_max_bytes = 0;
      staged = std::make_unique<Communicator>(provider, team, no_ll);
    }
  std::unique_ptr<Communicator> zero_copy_broadcast;  // for broadcast.symmetric
  if (std::find(ops.begin(), ops.end(), "broadcast.symmetric") != ops.end()) {
    Communicator::Options every_size = tuning;
    every_size.broadcast_direct_min_bytes = 0;
    zero_copy_broadcast = std::make_unique<Communicator>(provider, team, every_size);
  }
  Allocation window = provider.allocate(std::max<std::size_t>(max_bytes, 256));
  Allocation flags = provider.allocate(256);
  check_cuda(cudaMemset(flags.ptr, 0, 256), "cudaMemset(ping-pong flags)");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const auto finish = [&] { check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); };

#if APERTURE_BENCH_WITH_NCCL
  // NCCL in the same processes, one communicator over the same ranks and devices; never NVLS.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  ncclUniqueId id{};
  if (me == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  team.broadcast(&id, sizeof id, 0);
  ncclComm_t nccl = nullptr;
  const std::string nccl_skipped = nccl_unusable_reason(team);
  if (nccl_skipped.empty()) {
    check_nccl(ncclCommInitRank(&nccl, world, id, me), "ncclCommInitRank");
  } else if (me == 0) {
    std::fprintf(stderr, "aperture bench: NCCL baselines skipped: %s\n", nccl_skipped.c_str());
  }
  // Symmetric windows big enough for every op's input and output at the largest size. Without
  // them (an NCCL without CUMEM, say) the symmetric column stays '-' and the rest still runs.
  const std::size_t sym_in_bytes = std::max<std::size_t>(max_bytes, 4096);
  const std::size_t sym_out_bytes = sym_in_bytes * static_cast<std::size_t>(world);
  void* sym_in = nullptr;
  void* sym_out = nullptr;
  ncclWindow_t win_in = nullptr, win_out = nullptr;
  bool symmetric = nccl != nullptr;
  if (symmetric) {
    try {
      check_nccl(ncclMemAlloc(&sym_in, sym_in_bytes), "ncclMemAlloc(in)");
      check_nccl(ncclMemAlloc(&sym_out, sym_out_bytes), "ncclMemAlloc(out)");
      check_nccl(ncclCommWindowRegister(nccl, sym_in, sym_in_bytes, &win_in, NCCL_WIN_COLL_SYMMETRIC),
                 "ncclCommWindowRegister(in, NCCL_WIN_COLL_SYMMETRIC)");
      check_nccl(ncclCommWindowRegister(nccl, sym_out, sym_out_bytes, &win_out, NCCL_WIN_COLL_SYMMETRIC),
                 "ncclCommWindowRegister(out, NCCL_WIN_COLL_SYMMETRIC)");
      check_cuda(cudaMemset(sym_in, 0, sym_in_bytes), "cudaMemset(symmetric in)");
      check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    } catch (const Error& e) {
      symmetric = false;
      std::fprintf(stderr, "[rank %d] aperture bench: no NCCL symmetric column: %s\n", me, e.what());
    }
  }
#endif

  std::uint64_t ping_pong_next = 0;  // the flags only rise: every launch starts where the last ended
  std::vector<BenchRow> rows;
  for (const std::string& op : ops) {
    if (std::find(kDeviceOps.begin(), kDeviceOps.end(), op) == kDeviceOps.end() &&
        std::find(kMoreDeviceOps.begin(), kMoreDeviceOps.end(), op) == kMoreDeviceOps.end())
      throw Error(ErrorCode::invalid_argument, "bench: unknown op '" + op + "' for GPU memory; ops are barrier, put, get, ping_pong, broadcast, "
                  "all_gather, reduce_scatter, all_reduce, all_reduce.one_shot, all_reduce.two_shot, all_reduce.ll, "
                  "all_gather.staged, reduce_scatter.staged, ping_pong.table, all_to_all, all_gather.symmetric, "
                  "reduce_scatter.symmetric, all_reduce.symmetric, all_reduce.two_shot.symmetric, all_to_all.symmetric, "
                  "broadcast.symmetric, ag_gemm, gemm_rs, bulk_put, bulk_get");
    if (op == "ag_gemm" || op == "gemm_rs") {  // shapes of their own (options.gemm_rows), not --sizes
#if APERTURE_BENCH_WITH_NCCL
      void* nccl_comm = nccl;
#else
      void* nccl_comm = nullptr;
#endif
      const std::vector<BenchRow> got = bench_overlapped_gemm(team, provider, options, op, stream, nccl_comm);
      rows.insert(rows.end(), got.begin(), got.end());
      continue;
    }
    const bool reduces = op.rfind("reduce_scatter", 0) == 0 || op.rfind("all_reduce", 0) == 0;
    // Reductions in both types; moving bytes does not depend on the type.
    const std::vector<DataType> types = reduces ? std::vector<DataType>{DataType::bfloat16, DataType::float32}
                                                : std::vector<DataType>{DataType::float32};
    for (DataType type : types)
    for (std::size_t bytes : options.sizes) {
      const std::size_t esize = size_of(type);
      const bool is_all_to_all = op.rfind("all_to_all", 0) == 0;
      const bool blocks = op.rfind("reduce_scatter", 0) == 0 || is_all_to_all;
      const std::size_t count = bytes / esize / (blocks ? static_cast<std::size_t>(world) : 1);
      if (count == 0) continue;
      const bool ping_pong = op.rfind("ping_pong", 0) == 0;
      const bool one_row = op == "barrier" || ping_pong;
      if (one_row && bytes != options.sizes.front()) continue;  // moves no data
      if (ping_pong && world < 2) continue;
      const std::size_t in_count = blocks ? count * world : count;
      const std::size_t out_count = op.rfind("all_gather", 0) == 0 || is_all_to_all ? count * world : count;
      void* in = nullptr;
      void* out = nullptr;
      const bool sym_input = op.size() > 10 && op.compare(op.size() - 10, 10, ".symmetric") == 0;
      Allocation in_alloc;  // .symmetric: the input from the provider
      if (sym_input) {
        in_alloc = provider.allocate(std::max<std::size_t>(in_count * esize, 256));
        in = in_alloc.ptr;
      } else {
        check_cuda(cudaMalloc(&in, in_count * esize), "cudaMalloc(in)");
      }
      check_cuda(cudaMalloc(&out, out_count * esize), "cudaMalloc(out)");
      check_cuda(cudaMemset(in, 0, in_count * esize), "cudaMemset(in)");
      check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // the legacy stream's memset, before `stream` uses it
      BenchRow row;
      row.memory = "gpu";
      row.op = op;
      row.type = name_of(type);
      row.ranks = world;
      row.bytes = in_count * esize;
      row.baseline = "-";
      std::function<void()> ours, theirs, theirs2;
      bool captured = true;  // collectives: CUDA graphs on every side
      auto* peer_window = static_cast<unsigned char*>(window.ptr);
      const PeerView peers = window.map.peer_view();
      unsigned char* remote = translate(peer_window, me, right, window.map.host_peer_bases().data());
      const std::size_t n = count * esize;
#if APERTURE_BENCH_WITH_NCCL
      const ncclDataType_t nt = nccl_type(type);
#endif
      if (op == "barrier") {
        row.bytes = 0;
        ours = [&] { comm.barrier(stream); };
      } else if (ping_pong) {
        row.bytes = 0;
        captured = false;
        const int partner = me ^ 1;
        auto* flag = static_cast<std::uint64_t*>(flags.ptr);
        std::uint64_t* partner_flag = translate(flag, me, partner < world ? partner : me, flags.map.host_peer_bases().data());
        const bool plays = partner < world;
        ours = [&, flag, partner_flag, partner, plays] {
          if (plays)
            (op == "ping_pong" ? ping_pong_kernel<PingPong::translated_once>
                               : ping_pong_kernel<PingPong::translated_per_round>)<<<1, 1, 0, stream>>>(
                flags.map.peer_view(), flag, partner_flag, partner, ping_pong_next, kPingPongRounds);
          ping_pong_next += kPingPongRounds;
        };
        theirs = [&, flag, partner_flag, partner, plays] {
          if (plays)
            ping_pong_kernel<PingPong::raw><<<1, 1, 0, stream>>>(flags.map.peer_view(), flag, partner_flag, partner,
                                                                 ping_pong_next, kPingPongRounds);
          ping_pong_next += kPingPongRounds;
        };
        row.baseline = "raw ping-pong";
      } else if (op == "put") {
        ours = [&] { put_kernel<<<kPutBlocks, kPutThreads, 0, stream>>>(peers, peer_window, static_cast<unsigned char*>(in), n, right); };
        theirs = [&] { raw_copy_kernel<<<kPutBlocks, kPutThreads, 0, stream>>>(remote, static_cast<unsigned char*>(in), n); };
        theirs2 = [&] { check_cuda(cudaMemcpyAsync(remote, in, n, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync(put)"); };
        row.baseline = "raw peer pointer";
        row.baseline2 = "copy engine";
      } else if (op == "get") {
        ours = [&] { get_kernel<<<kPutBlocks, kPutThreads, 0, stream>>>(peers, static_cast<unsigned char*>(out), peer_window, n, right); };
        theirs = [&] { raw_copy_kernel<<<kPutBlocks, kPutThreads, 0, stream>>>(static_cast<unsigned char*>(out), remote, n); };
        theirs2 = [&] { check_cuda(cudaMemcpyAsync(out, remote, n, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync(get)"); };
        row.baseline = "raw peer pointer";
        row.baseline2 = "copy engine";
      } else if (op == "bulk_put" || op == "bulk_get") {
        const BulkOptions sm_copy{BulkPath::sm_copy};
        if (op == "bulk_put") {
          ours = [&] { bulk_put_bytes(peer_window, in, n, right, window.map, stream); };
          theirs = [&, sm_copy] { bulk_put_bytes(peer_window, in, n, right, window.map, stream, sm_copy); };
          theirs2 = [&] { check_cuda(cudaMemcpyAsync(remote, in, n, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync(put)"); };
        } else {
          ours = [&] { bulk_get_bytes(out, peer_window, n, right, window.map, stream); };
          theirs = [&, sm_copy] { bulk_get_bytes(out, peer_window, n, right, window.map, stream, sm_copy); };
          theirs2 = [&] { check_cuda(cudaMemcpyAsync(out, remote, n, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync(get)"); };
        }
        row.baseline = "SM copy alone";
        row.baseline2 = "copy engine";
      } else if (op.rfind("broadcast", 0) == 0) {
        ours = [&] { comm.broadcast(in, out, count, type, 0, stream); };
        if (sym_input) ours = [&] { zero_copy_broadcast->broadcast(in, in_alloc.map, out, count, type, 0, stream); };
#if APERTURE_BENCH_WITH_NCCL
        theirs = [&] { check_nccl(ncclBroadcast(in, out, count, nt, 0, nccl, stream), "ncclBroadcast"); };
        theirs2 = [&] { check_nccl(ncclBroadcast(sym_in, sym_out, count, nt, 0, nccl, stream), "ncclBroadcast(symmetric)"); };
#endif
      } else if (op.rfind("all_gather", 0) == 0) {
        Communicator& c = op == "all_gather.staged" ? *staged : comm;
        ours = [&] { c.all_gather(in, out, count, type, stream); };
        if (sym_input) ours = [&] { comm.all_gather(in, in_alloc.map, out, count, type, stream); };
#if APERTURE_BENCH_WITH_NCCL
        theirs = [&] { check_nccl(ncclAllGather(in, out, count, nt, nccl, stream), "ncclAllGather"); };
        theirs2 = [&] { check_nccl(ncclAllGather(sym_in, sym_out, count, nt, nccl, stream), "ncclAllGather(symmetric)"); };
#endif
      } else if (op.rfind("reduce_scatter", 0) == 0) {
        Communicator& c = op == "reduce_scatter.staged" ? *staged : comm;
        ours = [&] { c.reduce_scatter(in, out, count, type, ReduceOp::sum, stream); };
        if (sym_input) ours = [&] { comm.reduce_scatter(in, in_alloc.map, out, count, type, ReduceOp::sum, stream); };
#if APERTURE_BENCH_WITH_NCCL
        theirs = [&] { check_nccl(ncclReduceScatter(in, out, count, nt, ncclSum, nccl, stream), "ncclReduceScatter"); };
        theirs2 = [&] {
          check_nccl(ncclReduceScatter(sym_in, sym_out, count, nt, ncclSum, nccl, stream), "ncclReduceScatter(symmetric)");
        };
#endif
      } else if (is_all_to_all) {
        ours = [&] { comm.all_to_all(in, out, count, type, stream); };
        if (sym_input) ours = [&] { comm.all_to_all(in, in_alloc.map, out, count, type, stream); };
#if APERTURE_BENCH_WITH_NCCL
        const auto nccl_all_to_all = [&](const void* src, void* dst) {
          check_nccl(ncclGroupStart(), "ncclGroupStart");
          for (int peer = 0; peer < world; ++peer) {
            check_nccl(ncclSend(static_cast<const char*>(src) + peer * n, count, nt, peer, nccl, stream), "ncclSend");
            check_nccl(ncclRecv(static_cast<char*>(dst) + peer * n, count, nt, peer, nccl, stream), "ncclRecv");
          }
          check_nccl(ncclGroupEnd(), "ncclGroupEnd");
        };
        theirs = [&, nccl_all_to_all] { nccl_all_to_all(in, out); };
        theirs2 = [&, nccl_all_to_all] { nccl_all_to_all(sym_in, sym_out); };
#endif
      } else {
        const AllReduceAlgorithm algo = op == "all_reduce.one_shot"             ? AllReduceAlgorithm::one_shot
                                        : op.rfind("all_reduce.two_shot", 0) == 0 ? AllReduceAlgorithm::two_shot
                                        : op == "all_reduce.ll"                   ? AllReduceAlgorithm::ll
                                                                                  : AllReduceAlgorithm::automatic;
        ours = [&, algo] { comm.all_reduce(in, out, count, type, ReduceOp::sum, algo, stream); };
        if (sym_input)
          ours = [&, algo] { comm.all_reduce(in, in_alloc.map, out, count, type, ReduceOp::sum, algo, stream); };
#if APERTURE_BENCH_WITH_NCCL
        theirs = [&] { check_nccl(ncclAllReduce(in, out, count, nt, ncclSum, nccl, stream), "ncclAllReduce"); };
        theirs2 = [&] { check_nccl(ncclAllReduce(sym_in, sym_out, count, nt, ncclSum, nccl, stream), "ncclAllReduce(symmetric)"); };
#endif
      }
#if APERTURE_BENCH_WITH_NCCL
      if (theirs && row.baseline == "-" && nccl == nullptr) {  // NCCL skipped (nccl_skipped says why)
        theirs = nullptr;
        theirs2 = nullptr;
      } else if (theirs && row.baseline == "-") {
        row.baseline = "NCCL";
        row.baseline2 = "NCCL symmetric";
        if (!symmetric) theirs2 = nullptr;
      }
#endif
      const auto timed = [&](const std::function<void()>& call) {
        return captured ? time_captured(team, options, stream, call) : time_calls(team, options, call, finish);
      };
      team.barrier();  // the window is not reused before every rank is done with the last size
      const Timed a = timed(ours);
      row.aperture_us = a.us;
      row.iters = a.iters;
      if (theirs) row.baseline_us = timed(theirs).us;
      if (theirs2) row.baseline2_us = timed(theirs2).us;
      if (ping_pong) {  // per call: kPingPongRounds round trips; the figure is one way
        row.aperture_us /= 2.0 * kPingPongRounds;
        row.baseline_us /= 2.0 * kPingPongRounds;
      }
      check_cuda(cudaGetLastError(), "a bench kernel launch");
      comm.check(stream);
      if (staged) staged->check(stream);
      if (zero_copy_broadcast) zero_copy_broadcast->check(stream);
      if (me == 0)  // progress, and the rows so far should a later size not finish
        std::fprintf(stderr, "bench row: %s %s %zu B: aperture %.2f us, %s %.2f us, %s %.2f us\n", row.op.c_str(),
                     row.type.c_str(), row.bytes, row.aperture_us, row.baseline.c_str(), row.baseline_us,
                     row.baseline2.c_str(), row.baseline2_us);
      rows.push_back(row);
      if (sym_input) {
        team.barrier();  // every rank's kernels are done with every input (comm.check waited for this one's)
        provider.free(in_alloc);
      } else {
        cudaFree(in);
      }
      cudaFree(out);
    }
  }
  team.barrier();
#if APERTURE_BENCH_WITH_NCCL
  if (win_in != nullptr) ncclCommWindowDeregister(nccl, win_in);
  if (win_out != nullptr) ncclCommWindowDeregister(nccl, win_out);
  if (sym_in != nullptr) ncclMemFree(sym_in);
  if (sym_out != nullptr) ncclMemFree(sym_out);
  if (nccl != nullptr) ncclCommDestroy(nccl);
#endif
  check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
  provider.free(flags);
  provider.free(window);
  return rows;
}

}  // namespace aperture::bench
