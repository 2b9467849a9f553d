// bench/device/bench_gemm.cu — `aperture bench --ops ag_gemm,gemm_rs`: aperture::OverlappedGemm
// on the two GEMMs of a Llama-3-70B MLP block (hidden 8192, intermediate 28672), tensor parallel
// over the W ranks of the job, against what a user writes instead, in the same processes:
//
//   ag_gemm  C[M x 28672/W] = all_gather(X_shard[M/W x 8192]) @ W_up[8192 x 28672/W]
//   gemm_rs  C_shard[M/W x 8192] = reduce_scatter(H[M x 28672/W] @ W_down[28672/W x 8192])
//
//   (a) serial:      cuBLASLt GEMM and NCCL all-gather / reduce-scatter back to back on one stream;
//   (b) two streams: the same calls split so that they can overlap naively: ag: the local rows'
//                    GEMM beside ncclAllGather on a second stream, then the other rows; rs: the
//                    GEMM in W row chunks, each chunk's ncclReduce to its owner on a second stream
//                    while the next chunk multiplies.
// Per M, two rows: "<op>" (aperture; baseline (a); baseline2 (b)) and "<op>.parts" (the whole
// GEMM alone as the aperture column; the NCCL collective alone as the baseline). The overlap
// efficiency (T_a - T_aperture) / T_collective is printed on stderr per M. Every side is a CUDA
// graph of captured calls (time_captured). The row's `type` is "M=<rows>", `bytes` each rank's
// A input. Without NCCL the baselines are '-'.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#if APERTURE_BENCH_WITH_NCCL
#include <nccl.h>

#include "common/nccl_check.h"
#endif

#include "aperture/collectives/overlapped_gemm.h"
#include "aperture/error.h"
#include "aperture/team.h"
#include "device/bench_device.h"

namespace aperture::bench {

namespace {

constexpr std::size_t kHidden = 8192;
constexpr std::size_t kIntermediate = 28672;
constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
using bf16 = __nv_bfloat16;

void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(ErrorCode::system, std::string("bench: ") + call + " failed: " + cublasLtGetStatusName(status), call);
}

#if APERTURE_BENCH_WITH_NCCL
void check_nccl(ncclResult_t status, const char* call) {
  if (status != ncclSuccess)
    detail::throw_call_failure(detail::nccl_error_code(status), call,
                               detail::nccl_failure(status, call) + " (NCCL_DEBUG=WARN says more)", "bench");
}
#endif

// The baselines' GEMM, written here apart from the library's: row-major D = A @ B through
// cuBLASLt (column-major D^T = B^T A^T), bf16 in and out, fp32 accumulation, the heuristic's
// first algorithm per shape.
class BaselineGemm {
 public:
  BaselineGemm() {
    check_cublas(cublasLtCreate(&lt_), "cublasLtCreate");
    check_cuda(cudaMalloc(&workspace_, kWorkspaceBytes), "cudaMalloc(workspace)");
  }
  ~BaselineGemm() {
    for (auto& [key, p] : plans_) {
      cublasLtMatrixLayoutDestroy(p.a);
      cublasLtMatrixLayoutDestroy(p.b);
      cublasLtMatrixLayoutDestroy(p.d);
      cublasLtMatmulDescDestroy(p.op);
    }
    cublasLtDestroy(lt_);
    cudaFree(workspace_);
  }
  BaselineGemm(const BaselineGemm&) = delete;
  BaselineGemm& operator=(const BaselineGemm&) = delete;

  void run(const bf16* a, const bf16* b, bf16* d, std::size_t rows, std::size_t n, std::size_t k, cudaStream_t stream) {
    const Plan& p = plan(rows, n, k);
    const float alpha = 1.0f, beta = 0.0f;
    check_cublas(cublasLtMatmul(lt_, p.op, &alpha, b, p.b, a, p.a, &beta, d, p.d, d, p.d, &p.algo, workspace_, kWorkspaceBytes,
                                stream),
                 "cublasLtMatmul");
  }

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  const Plan& plan(std::size_t rows, std::size_t n, std::size_t k) {
    const auto key = std::make_tuple(rows, n, k);
    if (auto it = plans_.find(key); it != plans_.end()) return it->second;
    Plan p;
    check_cublas(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    check_cublas(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, n, k, static_cast<std::int64_t>(n)), "cublasLtMatrixLayoutCreate");
    check_cublas(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, k, rows, static_cast<std::int64_t>(k)), "cublasLtMatrixLayoutCreate");
    check_cublas(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_16BF, n, rows, static_cast<std::int64_t>(n)), "cublasLtMatrixLayoutCreate");
    cublasLtMatmulPreference_t pref = nullptr;
    check_cublas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const std::uint64_t ws = kWorkspaceBytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.b, p.a, p.d, p.d, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    check_cublas(status, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0) throw Error(ErrorCode::unavailable, "bench: cuBLASLt found no algorithm for the baseline GEMM");
    p.algo = result.algo;
    return plans_.emplace(key, p).first->second;
  }

  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  std::map<std::tuple<std::size_t, std::size_t, std::size_t>, Plan> plans_;
};

// Pseudo-random values in [-1, 1): a GEMM on constant data runs faster than on real data (fewer
// bits toggle, less power, higher clocks), and torch's driver (baseline (c)) uses randn.
__global__ void fill_random(bf16* p, std::size_t elements, std::uint64_t salt) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < elements;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::uint64_t x = (i + salt) * 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    p[i] = __float2bfloat16_rn(static_cast<float>(x >> 40) * 0x1.0p-23f - 1.0f);
  }
}

struct DeviceBuffer {
  bf16* p = nullptr;
  explicit DeviceBuffer(std::size_t elements) {
    static std::uint64_t salt = 0;
    check_cuda(cudaMalloc(&p, elements * sizeof(bf16)), "cudaMalloc(bench matrix)");
    fill_random<<<1024, 256>>>(p, elements, salt += 0x100000000ull);
    check_cuda(cudaGetLastError(), "fill_random");
  }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

}  // namespace

std::vector<BenchRow> bench_overlapped_gemm(Team& team, Provider& provider, const BenchOptions& options,
                                            const std::string& op, cudaStream_t stream, void* nccl_handle) {
  const int me = team.rank();
  const std::size_t world = static_cast<std::size_t>(team.size());
  const bool gather = op == "ag_gemm";
  // ag_gemm: k = hidden, n = intermediate / W (column-parallel up projection);
  // gemm_rs: k = intermediate / W, n = hidden (row-parallel down projection).
  const std::size_t k = gather ? kHidden : kIntermediate / world;
  const std::size_t n = gather ? kIntermediate / world : kHidden;
  if (kIntermediate % (64 * world) != 0)
    throw Error(ErrorCode::invalid_argument, "bench " + op + ": 28672 / " + std::to_string(world) +
                " ranks is not a multiple of 64; run at 1, 2, 4, 7 or 8 ranks");
#if APERTURE_BENCH_WITH_NCCL
  auto* nccl = static_cast<ncclComm_t>(nccl_handle);
#else
  (void)nccl_handle;
#endif
  OverlappedGemm tp(provider, team);
  BaselineGemm gemm;
  cudaStream_t second = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&second, cudaStreamNonBlocking), "cudaStreamCreate");
  check_cuda(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "cudaEventCreate");
  check_cuda(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), "cudaEventCreate");
#if APERTURE_BENCH_WITH_NCCL
  const auto fork_second = [&] {
    check_cuda(cudaEventRecord(fork, stream), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(second, fork, 0), "cudaStreamWaitEvent");
  };
  const auto join_second = [&] {
    check_cuda(cudaEventRecord(join, second), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream, join, 0), "cudaStreamWaitEvent");
  };
#endif

  std::vector<BenchRow> rows_out;
  for (std::size_t m : options.gemm_rows) {
    if (m % world != 0) continue;
    const std::size_t rows = m / world;
    tp.reserve(m, n, k);
    // ag_gemm: a = this rank's shard, full = the gathered A, c = m x n. gemm_rs: a = m x k,
    // full = the m x n partial product, c = the rows x n shard.
    DeviceBuffer a(gather ? rows * k : m * k), b(k * n), full(gather ? m * k : m * n), c(gather ? m * n : rows * n);
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    std::function<void()> ours, serial, two_streams, gemm_alone, collective_alone;
    if (gather) {
      ours = [&] { tp.ag_gemm(a.p, b.p, c.p, m, n, k, stream); };
      gemm_alone = [&] { gemm.run(full.p, b.p, c.p, m, n, k, stream); };
#if APERTURE_BENCH_WITH_NCCL
      const auto all_gather = [&, rows](cudaStream_t s) {
        check_nccl(ncclAllGather(a.p, full.p, rows * k, ncclBfloat16, nccl, s), "ncclAllGather");
      };
      collective_alone = [&, all_gather] { all_gather(stream); };
      serial = [&, all_gather] {
        all_gather(stream);
        gemm.run(full.p, b.p, c.p, m, n, k, stream);
      };
      two_streams = [&, all_gather, rows] {
        fork_second();
        all_gather(second);
        gemm.run(a.p, b.p, c.p + me * rows * n, rows, n, k, stream);  // the local rows need nothing
        join_second();
        const std::size_t before = static_cast<std::size_t>(me) * rows, after = m - before - rows;
        if (before != 0) gemm.run(full.p, b.p, c.p, before, n, k, stream);
        if (after != 0) gemm.run(full.p + (before + rows) * k, b.p, c.p + (before + rows) * n, after, n, k, stream);
      };
#endif
    } else {
      ours = [&] { tp.gemm_rs(a.p, b.p, c.p, m, n, k, stream); };
      gemm_alone = [&] { gemm.run(a.p, b.p, full.p, m, n, k, stream); };
#if APERTURE_BENCH_WITH_NCCL
      const auto reduce_scatter = [&, rows](cudaStream_t s) {
        check_nccl(ncclReduceScatter(full.p, c.p, rows * n, ncclBfloat16, ncclSum, nccl, s), "ncclReduceScatter");
      };
      collective_alone = [&, reduce_scatter] { reduce_scatter(stream); };
      serial = [&, reduce_scatter] {
        gemm.run(a.p, b.p, full.p, m, n, k, stream);
        reduce_scatter(stream);
      };
      two_streams = [&, rows] {
        // Chunk t (rank t's rows) is reduced to rank t while chunk t + 1 multiplies; every rank
        // goes through the chunks in the same order (NCCL's calls must match).
        for (std::size_t t = 0; t < world; ++t) {
          gemm.run(a.p + t * rows * k, b.p, full.p + t * rows * n, rows, n, k, stream);
          fork_second();
          check_nccl(ncclReduce(full.p + t * rows * n, c.p, rows * n, ncclBfloat16, ncclSum, static_cast<int>(t), nccl, second),
                     "ncclReduce");
        }
        join_second();
      };
#endif
    }
    BenchRow row;
    row.memory = "gpu";
    row.op = op;
    row.type = "M=" + std::to_string(m);
    row.ranks = static_cast<int>(world);
    row.bytes = (gather ? rows * k : m * k) * sizeof(bf16);
    team.barrier();
    const Timed t = time_captured(team, options, stream, ours);
    tp.check(stream);
    row.aperture_us = t.us;
    row.iters = t.iters;
    if (serial) {
      row.baseline = "(a) cuBLASLt+NCCL serial";
      row.baseline_us = time_captured(team, options, stream, serial).us;
      row.baseline2 = "(b) two streams";
      row.baseline2_us = time_captured(team, options, stream, two_streams).us;
    }
    BenchRow parts = row;
    parts.op = op + ".parts";
    parts.aperture_us = time_captured(team, options, stream, gemm_alone).us;
    parts.baseline = "-";
    parts.baseline_us = 0;
    parts.baseline2 = "-";
    parts.baseline2_us = 0;
    if (collective_alone) {
      parts.baseline = gather ? "NCCL all_gather alone" : "NCCL reduce_scatter alone";
      parts.baseline_us = time_captured(team, options, stream, collective_alone).us;
    }
    check_cuda(cudaGetLastError(), "a bench kernel launch");
    if (me == 0) {
      std::fprintf(stderr, "bench row: %s M=%zu n=%zu k=%zu x %zu ranks: aperture %.1f us, (a) %.1f us, (b) %.1f us, GEMM "
                   "alone %.1f us, collective alone %.1f us", op.c_str(), m, n, k, world, row.aperture_us, row.baseline_us,
                   row.baseline2_us, parts.aperture_us, parts.baseline_us);
      if (parts.baseline_us > 0)
        std::fprintf(stderr, ", overlap efficiency (T_a - T_aperture) / T_collective = %.2f",
                     (row.baseline_us - row.aperture_us) / parts.baseline_us);
      std::fprintf(stderr, "\n");
    }
    rows_out.push_back(row);
    rows_out.push_back(parts);
    team.barrier();  // no rank frees its matrices while a peer's copies into them may be queued
  }
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
  cudaStreamDestroy(second);
  return rows_out;
}

}  // namespace aperture::bench
