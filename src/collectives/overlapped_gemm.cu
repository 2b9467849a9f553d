// src/collectives/overlapped_gemm.cu — aperture::OverlappedGemm: the chunked schedules of
// aperture/collectives/overlapped_gemm.h, cuBLASLt for the GEMMs, and the tiny kernels that
// raise and wait on the flags (aperture::signal, aperture::wait_until_ge_for) and sum the
// partial products. A team over several nodes runs the unfused form instead (the GEMM beside
// the Communicator's collective across nodes).
#include "aperture/collectives/overlapped_gemm.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "aperture/collectives/communicator.h"
#include "aperture/collectives/handle.h"  // kFlagStride
#include "aperture/detail/host_wait.h"
#include "aperture/error.h"
#include "aperture/signal.h"
#include "aperture/team.h"
#include "aperture/translate.h"
#include "common/call_failure.h"
#include "common/cuda_check.h"

namespace aperture {

namespace {

constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
constexpr std::size_t kPointerAlignment = 16;  // cuBLASLt's bf16 kernels and the 16-byte sums

// cuBLASLt's status in the shape of every failed call's message (common/call_failure.h).
void check_cublas(cublasStatus_t status, std::string_view call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    detail::throw_call_failure(status == CUBLAS_STATUS_ALLOC_FAILED ? ErrorCode::out_of_memory : ErrorCode::system, call,
                               detail::call_failure_text(call, std::string(cublasLtGetStatusName(status)) + " (" +
                                                                   cublasLtGetStatusString(status) + ")"),
                               "OverlappedGemm");
}

// The flags, one 64-byte line each, in one symmetric allocation: [set][sender]. On rank r,
// flag(set, s) is the last epoch for which rank s announced the event of `set` to r.
enum FlagSet : int {
  kGatherArrived = 0,  // s's shard is in r's gather buffer
  kGatherFree = 1,     // s has finished reading its own gather buffer (r may write into it again)
  kPartialArrived = 2, // s's partial product for r's rows is in r's receive slot s
  kPartialFree = 3,    // s has summed its receive slots (r may write into s's slot r again)
  kFlagSets = 4,
};

// The local words, in device memory so a graph replay reads the current values.
enum LocalWord : int { kGatherEpoch = 0, kReduceEpoch = 1, kStatus = 2, kLocalWords = 3 };

struct FlagView {
  PeerView peers;  // the flags allocation's table
  std::uint64_t* base = nullptr;
  __device__ std::uint64_t* at(int set, int sender) const {
    return base + (static_cast<std::uint64_t>(set) * static_cast<std::uint64_t>(peers.world_size) +
                   static_cast<std::uint64_t>(sender)) * collectives::kFlagStride;
  }
};
static_assert(std::is_trivially_copyable_v<FlagView>, "passed to kernels by value");

__global__ void begin_call(std::uint64_t* epoch) { *epoch += 1; }

// Waits until this rank's flag(set, s) >= epoch - lag for one sender s (or, sender < 0, every
// other rank). A wait that gives up sets the status word; once it is set, later waits do not
// wait (the results are wrong anyway, and check() says so), so a lost peer costs one timeout.
__global__ void wait_flags(FlagView f, int set, int sender, const std::uint64_t* epoch, std::uint64_t lag,
                           std::uint64_t timeout_ns, std::uint64_t* status) {
  const std::uint64_t target = *epoch - lag;
  for (int s = 0; s < f.peers.world_size; ++s) {
    if (s == f.peers.rank || (sender >= 0 && s != sender)) continue;
    if (*static_cast<volatile std::uint64_t*>(status) != 0) return;
    if (!aperture::wait_until_ge_for(f.at(set, s), target, timeout_ns, nullptr)) atomicExch(reinterpret_cast<unsigned long long*>(status), 1ull);
  }
}

// Raises flag(set, me) on rank `to` (or, to < 0, on every other rank) to the current epoch:
// a release store at system scope, after everything this stream did before it.
__global__ void raise_flags(FlagView f, int set, int to, const std::uint64_t* epoch) {
  const std::uint64_t e = *epoch;
  for (int t = 0; t < f.peers.world_size; ++t) {
    if (t == f.peers.rank || (to >= 0 && t != to)) continue;
    aperture::signal(f.at(set, f.peers.rank), e, f.peers.rank, t, f.peers.peer_bases);
  }
}

// out[i] = bf16(sum over r of slots[r][i]) in fp32, ranks in order; 8 elements (16 bytes) a step.
__global__ void sum_partials(const __nv_bfloat16* slots, __nv_bfloat16* out, std::uint64_t elements, int world) {
  const std::uint64_t vectors = elements / 8;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t v = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < vectors; v += stride) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int r = 0; r < world; ++r) {
      const uint4 raw = reinterpret_cast<const uint4*>(slots + static_cast<std::uint64_t>(r) * elements)[v];
      const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
      for (int i = 0; i < 4; ++i) {
        const float2 x = __bfloat1622float2(pairs[i]);
        acc[2 * i] += x.x;
        acc[2 * i + 1] += x.y;
      }
    }
    uint4 packed;
    auto* pairs = reinterpret_cast<__nv_bfloat162*>(&packed);
    for (int i = 0; i < 4; ++i) pairs[i] = __floats2bfloat162_rn(acc[2 * i], acc[2 * i + 1]);
    reinterpret_cast<uint4*>(out)[v] = packed;
  }
}

// The unfused gemm_rs's conversions: its bf16 partial product widened to fp32 for the exchange,
// and the fp32 sum rounded once to bf16 (the collective's bf16 sum would round after every add).
__global__ void widen_bf16(const __nv_bfloat16* in, float* out, std::uint64_t elements) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < elements; i += stride)
    out[i] = __bfloat162float(in[i]);
}
__global__ void narrow_to_bf16(const float* in, __nv_bfloat16* out, std::uint64_t elements) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < elements; i += stride)
    out[i] = __float2bfloat16_rn(in[i]);
}

void check_launch(const char* kernel) {
  APERTURE_CUDA_CHECK(cudaGetLastError(), std::string("OverlappedGemm: launching ") + kernel);
}

// One cuBLASLt matmul shape: D[rows x n] = A[rows x k] @ B[k x n], all row-major. Row-major is
// column-major transposed, so cuBLASLt computes D^T = B^T A^T: its "A" is our B (n x k,
// column-major, ld n), its "B" our A (k x rows, ld k), its D ours (n x rows, ld n).
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t b_layout = nullptr, a_layout = nullptr, d_layout = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

}  // namespace

struct OverlappedGemm::State {
  Provider& provider;
  Team& team;
  int rank = 0;
  int world = 1;
  int sms = 0;
  std::uint64_t timeout_ns = 0;
  Allocation flags;
  Allocation gather;  // [m][k]: every rank's shard lands in its rows; this rank's own rows unused
  Allocation recv;    // [world][m/world][n]: slot s holds rank s's partial product of our rows
  std::uint64_t* local = nullptr;  // LocalWord
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  cudaStream_t side = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  std::map<std::tuple<std::size_t, std::size_t, std::size_t>, Plan> plans;
  // Set when some peer is out of load/store reach on a team over several nodes: every call then
  // runs unfused, the GEMM beside this Communicator's collective (hierarchical across nodes).
  std::unique_ptr<Communicator> across_nodes;
  struct Scratch {  // plain device memory of this rank (the collective's user buffers need not be symmetric)
    void* ptr = nullptr;
    std::size_t bytes = 0;
  };
  Scratch gathered;  // ag_gemm: [m][k], the whole A
  Scratch product;   // gemm_rs: this rank's whole partial product, in bf16 and fp32, and its fp32 shard of the sum
  cudaEvent_t unfused_done = nullptr;  // the last unfused call's use of the scratch, for a call on another stream

  State(Provider& p, Team& t) : provider(p), team(t) {}

  FlagView flag_view() const { return FlagView{flags.map.peer_view(), static_cast<std::uint64_t*>(flags.ptr)}; }

  const Plan& plan(std::size_t rows, std::size_t n, std::size_t k) {
    const auto key = std::make_tuple(rows, n, k);
    if (auto it = plans.find(key); it != plans.end()) return it->second;
    Plan p;
    check_cublas(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    check_cublas(cublasLtMatrixLayoutCreate(&p.b_layout, CUDA_R_16BF, n, k, static_cast<std::int64_t>(n)), "cublasLtMatrixLayoutCreate(B)");
    check_cublas(cublasLtMatrixLayoutCreate(&p.a_layout, CUDA_R_16BF, k, rows, static_cast<std::int64_t>(k)), "cublasLtMatrixLayoutCreate(A)");
    check_cublas(cublasLtMatrixLayoutCreate(&p.d_layout, CUDA_R_16BF, n, rows, static_cast<std::int64_t>(n)), "cublasLtMatrixLayoutCreate(D)");
    cublasLtMatmulPreference_t preference = nullptr;
    check_cublas(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    const std::uint64_t workspace_bytes = kWorkspaceBytes;
    const std::uint32_t alignment = kPointerAlignment;  // chunks start at row offsets, not 256-byte ones
    cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof workspace_bytes);
    for (auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                           CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      cublasLtMatmulPreferenceSetAttribute(preference, attribute, &alignment, sizeof alignment);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt, p.op, p.b_layout, p.a_layout, p.d_layout, p.d_layout,
                                                                 preference, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    check_cublas(status, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0)
      throw Error(ErrorCode::unavailable, "OverlappedGemm: cuBLASLt has no bf16 algorithm for a " + std::to_string(rows) +
                  " x " + std::to_string(k) + " by " + std::to_string(k) + " x " + std::to_string(n) + " product on this GPU");
    p.algo = result.algo;
    return plans.emplace(key, p).first->second;
  }

  // d[rows x n] = a[rows x k] @ b[k x n] on `stream`.
  void gemm(const void* a, const void* b, void* d, std::size_t rows, std::size_t n, std::size_t k, cudaStream_t stream) {
    const Plan& p = plan(rows, n, k);
    const float alpha = 1.0f, beta = 0.0f;
    check_cublas(cublasLtMatmul(lt, p.op, &alpha, b, p.b_layout, a, p.a_layout, &beta, d, p.d_layout, d, p.d_layout, &p.algo,
                                workspace, kWorkspaceBytes, stream),
                 "cublasLtMatmul");
  }

  void wait(int set, int sender, int lag, cudaStream_t stream, LocalWord epoch) {
    wait_flags<<<1, 1, 0, stream>>>(flag_view(), set, sender, local + epoch, static_cast<std::uint64_t>(lag), timeout_ns,
                                    local + kStatus);
    check_launch("wait_flags");
  }
  void raise(int set, int to, cudaStream_t stream, LocalWord epoch) {
    raise_flags<<<1, 1, 0, stream>>>(flag_view(), set, to, local + epoch);
    check_launch("raise_flags");
  }

  // Collective: `buffer` holds at least `bytes` afterwards. Growing waits for every rank's queued
  // work first (peers may still write into the old buffer), so it is refused inside a capture.
  void ensure(Allocation& buffer, std::size_t bytes, const char* what, cudaStream_t stream) {
    if (buffer.ptr != nullptr && buffer.bytes >= bytes) return;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    APERTURE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture), "OverlappedGemm");
    if (capture != cudaStreamCaptureStatusNone)
      throw Error(ErrorCode::invalid_argument, std::string("OverlappedGemm: the ") + what + " buffer must grow to " +
                  std::to_string(bytes) + " bytes while the stream is being captured into a CUDA graph; call reserve(m, n, k) "
                  "with the largest shapes before capturing");
    APERTURE_CUDA_CHECK(cudaDeviceSynchronize(), "OverlappedGemm");
    team.barrier();  // no peer still writes into the old buffer
    if (buffer.ptr != nullptr) provider.free(buffer);
    buffer = provider.allocate(bytes);
    if (!buffer.map.all_direct())
      throw Error(ErrorCode::unavailable, std::string("OverlappedGemm: provider ") + std::string(provider.name()) +
                  " cannot address every peer's memory directly; ag_gemm and gemm_rs need all ranks on one NVLink/PCIe domain");
  }

  // The unfused form (a team over several nodes) waits on the host (its scratch grows after a
  // stream synchronization; the MPI path between nodes waits for the stream), which a CUDA graph
  // cannot hold: refused before anything is queued.
  void refuse_capture(const char* call, cudaStream_t stream) const {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    APERTURE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture), "OverlappedGemm");
    if (capture != cudaStreamCaptureStatusNone)
      throw Error(ErrorCode::unavailable,
                  std::string("OverlappedGemm::") + call + ": the stream is being captured into a CUDA graph, but the team "
                  "spans " + std::to_string(team.node_count()) + " nodes, where " + call + " runs unfused on the "
                  "Communicator's collectives between nodes, waiting on the host (scratch that grows after a stream "
                  "synchronization; the MPI path's staging): it is not captured. Call it outside the capture (on one node "
                  "it can be captured)");
  }
  // `buffer` holds at least `bytes` afterwards (this rank's memory alone: no peer writes into it).
  // Growing waits for the calls that still use it.
  void ensure(Scratch& buffer, std::size_t bytes, cudaStream_t stream) {
    if (buffer.ptr != nullptr && buffer.bytes >= bytes) return;
    APERTURE_CUDA_CHECK(cudaStreamSynchronize(stream), "OverlappedGemm");
    if (unfused_done != nullptr) APERTURE_CUDA_CHECK(cudaEventSynchronize(unfused_done), "OverlappedGemm");
    APERTURE_CUDA_CHECK(cudaFree(buffer.ptr), "OverlappedGemm");
    buffer = Scratch{};
    APERTURE_CUDA_CHECK(cudaMalloc(&buffer.ptr, bytes), "OverlappedGemm: " + std::to_string(bytes) + " bytes of scratch");
    buffer.bytes = bytes;
  }
  // Orders this call's use of the scratch after the previous call's, whatever streams they ran on.
  void begin_unfused(cudaStream_t stream) {
    APERTURE_CUDA_CHECK(cudaStreamWaitEvent(stream, unfused_done, 0), "OverlappedGemm");
  }
  void end_unfused(cudaStream_t stream) { APERTURE_CUDA_CHECK(cudaEventRecord(unfused_done, stream), "OverlappedGemm"); }
};

namespace {

std::string shape_text(std::size_t m, std::size_t n, std::size_t k) {
  return "m = " + std::to_string(m) + ", n = " + std::to_string(n) + ", k = " + std::to_string(k);
}

void check_shape(const char* call, std::size_t m, std::size_t n, std::size_t k, int world) {
  const auto fail = [&](const std::string& why) {
    throw Error(ErrorCode::invalid_argument, std::string("OverlappedGemm::") + call + ": " + shape_text(m, n, k) + ": " + why);
  };
  if (m == 0 || m % static_cast<std::size_t>(world) != 0)
    fail("m must be a positive multiple of the team size " + std::to_string(world) +
         " (m is the full row count; each rank holds m / " + std::to_string(world) + " rows); pad the rows");
  if (n == 0 || n % 64 != 0) fail("n must be a positive multiple of 64; pad the columns");
  if (k == 0 || k % 64 != 0) fail("k must be a positive multiple of 64; pad the inner dimension");
}

void check_pointer(const char* call, const char* what, const void* p) {
  if (p == nullptr)
    throw Error(ErrorCode::invalid_argument, std::string("OverlappedGemm::") + call + ": " + what + " is null");
  if (reinterpret_cast<std::uintptr_t>(p) % kPointerAlignment != 0)
    throw Error(ErrorCode::invalid_argument, std::string("OverlappedGemm::") + call + ": " + what + " = " +
                std::to_string(reinterpret_cast<std::uintptr_t>(p)) + " is not 16-byte aligned; bf16 matrices must start "
                "on 16 bytes (cudaMalloc gives 256)");
}

// The unfused gemm_rs's scratch: the bf16 partial product [m][n], it widened to fp32 [m][n], and
// this rank's fp32 sum [rows][n].
std::size_t unfused_rs_bytes(std::size_t m, std::size_t n, std::size_t rows) {
  return m * n * sizeof(__nv_bfloat16) + m * n * sizeof(float) + rows * n * sizeof(float);
}

// The checks of an ag_gemm or gemm_rs call (its shape, its three matrices); returns the rows
// each rank holds.
std::size_t check_call(const char* call, std::size_t m, std::size_t n, std::size_t k, int world,
                       std::initializer_list<std::pair<const char*, const void*>> matrices) {
  check_shape(call, m, n, k, world);
  for (const auto& [what, p] : matrices) check_pointer(call, what, p);
  return m / static_cast<std::size_t>(world);
}

}  // namespace

OverlappedGemm::OverlappedGemm(Provider& provider, Team& team) : state_(std::make_unique<State>(provider, team)) {
  State& s = *state_;
  if (provider.memory_kind() != MemoryKind::device)
    throw Error(ErrorCode::invalid_argument, "OverlappedGemm: provider " + std::string(provider.name()) +
                " serves host memory; ag_gemm and gemm_rs run on GPUs: use cuda-ipc, cuda-vmm, nvshmem or nccl");
  s.rank = team.rank();
  s.world = team.size();
  s.timeout_ns = detail::host_timeout_ns();
  const std::size_t flag_bytes = static_cast<std::size_t>(kFlagSets) * static_cast<std::size_t>(s.world) *
                                 collectives::kFlagStride * sizeof(std::uint64_t);
  s.flags = provider.allocate(flag_bytes);
  cudaPointerAttributes attributes{};
  APERTURE_CUDA_CHECK(cudaPointerGetAttributes(&attributes, s.flags.ptr), "OverlappedGemm: flags");
  APERTURE_CUDA_CHECK(cudaSetDevice(attributes.device), "OverlappedGemm");
  APERTURE_CUDA_CHECK(cudaDeviceGetAttribute(&s.sms, cudaDevAttrMultiProcessorCount, attributes.device), "OverlappedGemm");
  bool unfused = false;
  if (team.node_count() > 1) {
    // Every rank takes the same form: unfused as soon as any rank cannot load/store some peer's flags.
    const std::uint8_t mine = s.flags.map.all_direct() ? 0 : 1;
    std::vector<std::uint8_t> every(static_cast<std::size_t>(s.world));
    team.allgather(&mine, every.data(), 1);
    unfused = std::find(every.begin(), every.end(), std::uint8_t{1}) != every.end();
  } else if (!s.flags.map.all_direct()) {
    throw Error(ErrorCode::unavailable, "OverlappedGemm: provider " + std::string(provider.name()) +
                " cannot address every peer's memory directly; ag_gemm and gemm_rs need all ranks on one NVLink/PCIe domain");
  }
  if (unfused) {
    try {
      s.across_nodes = std::make_unique<Communicator>(provider, team);  // collective, as the flags were
    } catch (...) {
      provider.free(s.flags);  // every rank gets here alike (MPI did not start the ranks, ...)
      throw;
    }
  }
  APERTURE_CUDA_CHECK(cudaMemset(s.flags.ptr, 0, flag_bytes), "OverlappedGemm: flags");
  APERTURE_CUDA_CHECK(cudaMalloc(&s.local, kLocalWords * sizeof(std::uint64_t)), "OverlappedGemm: epochs");
  APERTURE_CUDA_CHECK(cudaMemset(s.local, 0, kLocalWords * sizeof(std::uint64_t)), "OverlappedGemm: epochs");
  APERTURE_CUDA_CHECK(cudaMalloc(&s.workspace, kWorkspaceBytes), "OverlappedGemm: cuBLASLt workspace");
  check_cublas(cublasLtCreate(&s.lt), "cublasLtCreate");
  APERTURE_CUDA_CHECK(cudaStreamCreateWithFlags(&s.side, cudaStreamNonBlocking), "OverlappedGemm: the side stream");
  APERTURE_CUDA_CHECK(cudaEventCreateWithFlags(&s.fork, cudaEventDisableTiming), "OverlappedGemm");
  APERTURE_CUDA_CHECK(cudaEventCreateWithFlags(&s.join, cudaEventDisableTiming), "OverlappedGemm");
  if (unfused) APERTURE_CUDA_CHECK(cudaEventCreateWithFlags(&s.unfused_done, cudaEventDisableTiming), "OverlappedGemm");
  APERTURE_CUDA_CHECK(cudaDeviceSynchronize(), "OverlappedGemm");
  team.barrier();  // every rank's flags are zero before any peer raises one
}

OverlappedGemm::~OverlappedGemm() {
  State& s = *state_;
  try {
    cudaDeviceSynchronize();
    s.team.barrier();  // no peer still writes into this rank's buffers
    s.across_nodes.reset();  // collective: frees its scratch
    if (s.recv.ptr != nullptr) s.provider.free(s.recv);
    if (s.gather.ptr != nullptr) s.provider.free(s.gather);
    s.provider.free(s.flags);
  } catch (...) {
    // A destructor does not throw; a rank that failed has already reported why.
  }
  for (auto& [key, p] : s.plans) {
    cublasLtMatrixLayoutDestroy(p.b_layout);
    cublasLtMatrixLayoutDestroy(p.a_layout);
    cublasLtMatrixLayoutDestroy(p.d_layout);
    cublasLtMatmulDescDestroy(p.op);
  }
  if (s.lt != nullptr) cublasLtDestroy(s.lt);
  if (s.fork != nullptr) cudaEventDestroy(s.fork);
  if (s.join != nullptr) cudaEventDestroy(s.join);
  if (s.side != nullptr) cudaStreamDestroy(s.side);
  if (s.unfused_done != nullptr) cudaEventDestroy(s.unfused_done);
  cudaFree(s.gathered.ptr);
  cudaFree(s.product.ptr);
  cudaFree(s.workspace);
  cudaFree(s.local);
}

int OverlappedGemm::rank() const { return state_->rank; }
int OverlappedGemm::size() const { return state_->world; }

void OverlappedGemm::reserve(std::size_t m, std::size_t n, std::size_t k) {
  State& s = *state_;
  check_shape("reserve", m, n, k, s.world);
  if (s.world == 1) return;  // one rank moves nothing: no symmetric buffers
  if (s.across_nodes) {
    s.ensure(s.gathered, m * k * sizeof(__nv_bfloat16), nullptr);
    s.ensure(s.product, unfused_rs_bytes(m, n, m / static_cast<std::size_t>(s.world)), nullptr);
    return;
  }
  s.ensure(s.gather, m * k * sizeof(__nv_bfloat16), "gather", nullptr);
  s.ensure(s.recv, m * n * sizeof(__nv_bfloat16), "receive", nullptr);
}

void OverlappedGemm::ag_gemm(const void* a_shard, const void* b, void* c, std::size_t m, std::size_t n, std::size_t k,
                             Stream stream_handle) {
  State& s = *state_;
  const std::size_t rows = check_call("ag_gemm", m, n, k, s.world, {{"a_shard", a_shard}, {"b", b}, {"c", c}});
  auto stream = static_cast<cudaStream_t>(stream_handle);
  const auto* own = static_cast<const __nv_bfloat16*>(a_shard);
  auto* out = static_cast<__nv_bfloat16*>(c);
  if (s.world == 1) {
    s.gemm(own, b, out, rows, n, k, stream);
    return;
  }
  if (s.across_nodes) {  // unfused: gather all of A, then one GEMM
    s.refuse_capture("ag_gemm", stream);
    s.ensure(s.gathered, m * k * sizeof(__nv_bfloat16), stream);
    s.begin_unfused(stream);
    s.across_nodes->all_gather(a_shard, s.gathered.ptr, rows * k, DataType::bfloat16, stream);
    s.gemm(s.gathered.ptr, b, out, m, n, k, stream);
    s.end_unfused(stream);
    return;
  }
  s.ensure(s.gather, m * k * sizeof(__nv_bfloat16), "gather", stream);
  auto* gathered = static_cast<__nv_bfloat16*>(s.gather.ptr);
  const std::size_t shard_bytes = rows * k * sizeof(__nv_bfloat16);
  const std::int64_t* bases = s.gather.map.host_peer_bases().data();

  begin_call<<<1, 1, 0, stream>>>(s.local + kGatherEpoch);
  check_launch("begin_call");
  // The side stream: push this shard to every peer, nearest (rank + 1) first, each after that
  // peer has finished reading the previous call's rows.
  APERTURE_CUDA_CHECK(cudaEventRecord(s.fork, stream), "OverlappedGemm: fork");
  APERTURE_CUDA_CHECK(cudaStreamWaitEvent(s.side, s.fork, 0), "OverlappedGemm: fork");
  for (int j = 1; j < s.world; ++j) {
    const int peer = (s.rank + j) % s.world;
    s.wait(kGatherFree, peer, 1, s.side, kGatherEpoch);
    __nv_bfloat16* there = translate(gathered + static_cast<std::size_t>(s.rank) * rows * k, s.rank, peer, bases);
    APERTURE_CUDA_CHECK(cudaMemcpyAsync(there, own, shard_bytes, cudaMemcpyDeviceToDevice, s.side),
                        "OverlappedGemm: shard to peer");
    s.raise(kGatherArrived, peer, s.side, kGatherEpoch);
  }
  // The caller's stream: the local rows at once, then each peer's as it lands, in the order they
  // are sent (rank - 1 pushes to us first).
  s.gemm(own, b, out + static_cast<std::size_t>(s.rank) * rows * n, rows, n, k, stream);
  for (int j = 1; j < s.world; ++j) {
    const int from = (s.rank - j + s.world) % s.world;
    s.wait(kGatherArrived, from, 0, stream, kGatherEpoch);
    s.gemm(gathered + static_cast<std::size_t>(from) * rows * k, b, out + static_cast<std::size_t>(from) * rows * n, rows,
           n, k, stream);
  }
  s.raise(kGatherFree, -1, stream, kGatherEpoch);  // our gather buffer may be written for the next call
  APERTURE_CUDA_CHECK(cudaEventRecord(s.join, s.side), "OverlappedGemm: join");
  APERTURE_CUDA_CHECK(cudaStreamWaitEvent(stream, s.join, 0), "OverlappedGemm: join");  // a_shard is read by then
}

void OverlappedGemm::gemm_rs(const void* a, const void* b, void* c_shard, std::size_t m, std::size_t n, std::size_t k,
                             Stream stream_handle) {
  State& s = *state_;
  const std::size_t rows = check_call("gemm_rs", m, n, k, s.world, {{"a", a}, {"b", b}, {"c_shard", c_shard}});
  auto stream = static_cast<cudaStream_t>(stream_handle);
  const auto* in = static_cast<const __nv_bfloat16*>(a);
  if (s.world == 1) {
    s.gemm(in, b, c_shard, rows, n, k, stream);
    return;
  }
  if (s.across_nodes) {  // unfused: the whole partial product, then the reduce-scatter across nodes
    // The partials travel as fp32 (twice the bytes of bf16): summed in fp32 and rounded once at the
    // end, as on one node, where the collective's bf16 sum would round after each of the W - 1 adds.
    s.refuse_capture("gemm_rs", stream);
    s.ensure(s.product, unfused_rs_bytes(m, n, rows), stream);
    auto* partial = static_cast<__nv_bfloat16*>(s.product.ptr);
    auto* wide = reinterpret_cast<float*>(partial + m * n);  // [m][n]
    float* summed = wide + m * n;                            // [rows][n]
    s.begin_unfused(stream);
    s.gemm(in, b, partial, m, n, k, stream);
    const int threads = 256;
    const auto blocks = [&](std::uint64_t elements) {
      return static_cast<int>(std::min<std::uint64_t>((elements + threads - 1) / threads, 4ull * s.sms));
    };
    widen_bf16<<<blocks(m * n), threads, 0, stream>>>(partial, wide, m * n);
    check_launch("widen_bf16");
    s.across_nodes->reduce_scatter(wide, summed, rows * n, DataType::float32, ReduceOp::sum, stream);
    narrow_to_bf16<<<blocks(rows * n), threads, 0, stream>>>(summed, static_cast<__nv_bfloat16*>(c_shard), rows * n);
    check_launch("narrow_to_bf16");
    s.end_unfused(stream);
    return;
  }
  s.ensure(s.recv, m * n * sizeof(__nv_bfloat16), "receive", stream);
  auto* slots = static_cast<__nv_bfloat16*>(s.recv.ptr);
  const std::size_t slot_elements = rows * n;
  const std::int64_t* bases = s.recv.map.host_peer_bases().data();

  begin_call<<<1, 1, 0, stream>>>(s.local + kReduceEpoch);
  check_launch("begin_call");
  // Each owner's rows in turn, the next rank's first and our own last; cuBLASLt stores the
  // chunk straight into the owner's slot for us, then a flag follows it.
  for (int j = 1; j <= s.world; ++j) {
    const int owner = (s.rank + j) % s.world;
    __nv_bfloat16* slot = slots + static_cast<std::size_t>(s.rank) * slot_elements;
    if (owner != s.rank) s.wait(kPartialFree, owner, 1, stream, kReduceEpoch);
    s.gemm(in + static_cast<std::size_t>(owner) * rows * k, b, translate(slot, s.rank, owner, bases), rows, n, k, stream);
    if (owner != s.rank) s.raise(kPartialArrived, owner, stream, kReduceEpoch);
  }
  s.wait(kPartialArrived, -1, 0, stream, kReduceEpoch);
  const int threads = 256;
  const std::uint64_t vectors = slot_elements / 8;
  const int blocks = static_cast<int>(std::min<std::uint64_t>((vectors + threads - 1) / threads, 4ull * s.sms));
  sum_partials<<<blocks, threads, 0, stream>>>(slots, static_cast<__nv_bfloat16*>(c_shard), slot_elements, s.world);
  check_launch("sum_partials");
  s.raise(kPartialFree, -1, stream, kReduceEpoch);  // our slots may be written for the next call
}

void OverlappedGemm::check(Stream stream_handle) {
  State& s = *state_;
  APERTURE_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_handle)), "OverlappedGemm");
  APERTURE_CUDA_CHECK(cudaStreamSynchronize(s.side), "OverlappedGemm: the side stream");
  if (s.across_nodes) s.across_nodes->check(stream_handle);  // its node phases' kernel waits
  std::uint64_t status = 0;
  APERTURE_CUDA_CHECK(cudaMemcpy(&status, s.local + kStatus, sizeof status, cudaMemcpyDeviceToHost), "OverlappedGemm: status");
  if (status != 0)
    throw Error(ErrorCode::timeout, "OverlappedGemm: a device wait gave up after " +
                std::to_string(static_cast<double>(s.timeout_ns) / 1e9) + " s (APERTURE_TIMEOUT): a peer did not make "
                "the same ag_gemm/gemm_rs calls, or is stuck; the results since are wrong");
}

}  // namespace aperture
