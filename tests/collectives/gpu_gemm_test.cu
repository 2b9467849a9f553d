// aperture::OverlappedGemm on GPU memory (the cuda-ipc provider; APERTURE_GPU_PROVIDER picks
// another): ag_gemm and gemm_rs at several shapes (one row per rank up to hundreds, n and k from
// 64 up), two calls of each launched back to back with no host synchronisation between them (the
// buffers reused at once), a CUDA graph captured once and replayed on new inputs, and every
// shape the contract refuses. Every element of every output is checked against a reference
// computed on the host in double precision from the same per-rank, per-element values (the
// unfused GEMM and the collective, written out), with a bf16 tolerance. A bf16 rounding errs by
// at most half an ulp, 2^-8 relative; an ulp is at most 2^-7 relative. ag_gemm rounds once: 2^-7
// of the result's magnitude. gemm_rs's partial products travel as bf16 and the reference rounds
// them too, but a partial whose fp32 value sits at a rounding boundary may round the other way
// on the GPU than in double on the host: an ulp, 2^-7 of each partial's magnitude; and the sum is
// rounded once more, 2^-8 of it. Both add 2^-15 of the sum of |a b| for the fp32 accumulation.
//
// As two nodes (`aperture launch --mpi --nodes 2`, APERTURE_TEST_EXPECTED_NODES=2) the same calls
// and checks run OverlappedGemm's unfused form (the Communicator's all_gather and reduce_scatter
// across nodes), and the graph case checks instead that a capture is refused, naming why. The
// bound is the same there: ag_gemm's all_gather copies, and gemm_rs rounds each partial product
// to bf16 as on one node, widens it to fp32, folds the ranks in fp32 (node by node, then over the
// nodes) and rounds to bf16 once at the end: beside the one-node terms only fp32 roundings, at
// most W - 1 of 2^-24 relative, inside the 2^-15 term. Had it summed in bf16, each of the W - 1
// adds would round to bf16 (the collectives round to the element type at every step): W - 1
// terms of 2^-8 where the bound allows one, over it from 3 ranks up.
//
// A plain program (the GPU machine may lack GoogleTest), run as ranks of a job:
//     aperture launch -n 2 -- gpu_gemm_test
//     aperture launch --mpi --nodes 2 -n 2 -- gpu_gemm_test     (two nodes sharing a GPU)
// Prints "SKIP: <reason>" and exits 77 without a GPU; "PASS gpu_gemm_test: N checks" or
// "FAIL ..." and exits 0 or 1.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <aperture/aperture.h>
#include <aperture/collectives/overlapped_gemm.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../common/test_seed.h"

namespace {

constexpr int kSkip = 77;
using bf16 = __nv_bfloat16;

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw aperture::Error(aperture::ErrorCode::system,
                          std::string(call) + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}
#define CUDA(call) check_cuda((call), #call)

std::uint64_t g_seed = 0;
int g_rank = 0, g_world = 1;
long long g_checks = 0, g_failures = 0;

// Rank `rank`'s element i of matrix `salt`, a bf16 in [-1, 1).
bf16 value(int rank, std::uint64_t salt, std::uint64_t i) {
  const std::uint64_t h = test::draw(g_seed, rank, salt, i);
  return __float2bfloat16_rn(static_cast<float>(static_cast<double>(h >> 11) * 0x1.0p-53 * 2.0 - 1.0));
}

std::vector<bf16> matrix(int rank, std::uint64_t salt, std::size_t elements) {
  std::vector<bf16> v(elements);
  for (std::size_t i = 0; i < elements; ++i) v[i] = value(rank, salt, i);
  return v;
}

struct Device {
  bf16* p = nullptr;
  explicit Device(std::size_t elements) { CUDA(cudaMalloc(&p, std::max<std::size_t>(elements, 1) * sizeof(bf16))); }
  ~Device() { cudaFree(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  void upload(const std::vector<bf16>& v) { CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(bf16), cudaMemcpyHostToDevice)); }
  std::vector<bf16> download(std::size_t elements) const {
    std::vector<bf16> v(elements);
    CUDA(cudaMemcpy(v.data(), p, elements * sizeof(bf16), cudaMemcpyDeviceToHost));
    return v;
  }
};

// out[i][j] += sum_k a[i][k] * b[k][j] (and |.| into mag), row-major, in double.
void host_gemm(const std::vector<bf16>& a, std::size_t a_row0, const std::vector<bf16>& b, std::size_t rows, std::size_t n,
               std::size_t k, std::vector<double>& out, std::vector<double>& mag, bool round_to_bf16) {
  std::vector<double> row(n), row_mag(n);
  for (std::size_t i = 0; i < rows; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    std::fill(row_mag.begin(), row_mag.end(), 0.0);
    for (std::size_t kk = 0; kk < k; ++kk) {
      const double x = __bfloat162float(a[(a_row0 + i) * k + kk]);
      const bf16* brow = &b[kk * n];
      for (std::size_t j = 0; j < n; ++j) {
        const double y = x * __bfloat162float(brow[j]);
        row[j] += y;
        row_mag[j] += std::fabs(y);
      }
    }
    for (std::size_t j = 0; j < n; ++j) {
      // gemm_rs's partial products travel as bf16; the magnitude bound covers that rounding.
      out[i * n + j] += round_to_bf16 ? static_cast<double>(__bfloat162float(__float2bfloat16_rn(static_cast<float>(row[j])))) : row[j];
      // The fp32 accumulation over k <= 320 terms errs by at most k * 2^-24 of sum |a b| (below
      // 2^-15 of it); 2^-8 of it here becomes 2^-15 through compare's 2^-7.
      mag[i * n + j] += std::fabs(row[j]) + row_mag[j] * 0x1.0p-8;
    }
  }
}

// got against want, each element within 2^-7 of its magnitude, plus `final_rounding` of |want|
// where the result is a sum of rounded partials rounded once more (gemm_rs).
void compare(const std::string& what, const std::vector<bf16>& got, const std::vector<double>& want,
             const std::vector<double>& mag, double final_rounding) {
  long long bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ++g_checks;
    const double g = __bfloat162float(got[i]);
    const double tolerance = 0x1.0p-7 * mag[i] + final_rounding * std::fabs(want[i]) + 1e-6;
    if (!(std::fabs(g - want[i]) <= tolerance)) {
      if (bad++ < 5)
        std::printf("[rank %d] %s: element %zu is %.6g, want %.6g (tolerance %.3g)\n", g_rank, what.c_str(), i, g, want[i], tolerance);
    }
  }
  g_failures += bad;
}

// What rank `me` must get from ag_gemm of the matrices with these salts.
void check_ag(const std::string& what, const std::vector<bf16>& got, std::uint64_t salt, std::size_t m, std::size_t n,
              std::size_t k) {
  const std::size_t rows = m / static_cast<std::size_t>(g_world);
  const std::vector<bf16> b = matrix(g_rank, salt + 1, k * n);
  std::vector<double> want(m * n, 0.0), mag(m * n, 0.0);
  for (int r = 0; r < g_world; ++r) {
    const std::vector<bf16> shard = matrix(r, salt, rows * k);
    std::vector<double> part(rows * n, 0.0), part_mag(rows * n, 0.0);
    host_gemm(shard, 0, b, rows, n, k, part, part_mag, false);
    std::copy(part.begin(), part.end(), want.begin() + static_cast<std::ptrdiff_t>(r * rows * n));
    std::copy(part_mag.begin(), part_mag.end(), mag.begin() + static_cast<std::ptrdiff_t>(r * rows * n));
  }
  compare(what, got, want, mag, 0.0);
}

void check_rs(const std::string& what, const std::vector<bf16>& got, std::uint64_t salt, std::size_t m, std::size_t n,
              std::size_t k) {
  const std::size_t rows = m / static_cast<std::size_t>(g_world);
  std::vector<double> want(rows * n, 0.0), mag(rows * n, 0.0);
  for (int r = 0; r < g_world; ++r)  // rank r's partial product of our rows
    host_gemm(matrix(r, salt, m * k), static_cast<std::size_t>(g_rank) * rows, matrix(r, salt + 1, k * n), rows, n, k, want, mag,
              true);
  compare(what, got, want, mag, 0x1.0p-8);
}

std::string shape(std::size_t m, std::size_t n, std::size_t k) {
  return "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k);
}

// Two calls of each op back to back on new inputs (salts), then every element of all four.
void shape_case(aperture::OverlappedGemm& tp, cudaStream_t stream, std::size_t rows, std::size_t n, std::size_t k,
                std::uint64_t salt) {
  const std::size_t m = rows * static_cast<std::size_t>(g_world);
  Device ag_a[2] = {Device(rows * k), Device(rows * k)}, ag_b[2] = {Device(k * n), Device(k * n)};
  Device ag_c[2] = {Device(m * n), Device(m * n)};
  Device rs_a[2] = {Device(m * k), Device(m * k)}, rs_b[2] = {Device(k * n), Device(k * n)};
  Device rs_c[2] = {Device(rows * n), Device(rows * n)};
  for (int call = 0; call < 2; ++call) {
    const std::uint64_t s = salt + 10 * static_cast<std::uint64_t>(call);
    ag_a[call].upload(matrix(g_rank, s, rows * k));
    ag_b[call].upload(matrix(g_rank, s + 1, k * n));
    rs_a[call].upload(matrix(g_rank, s + 5, m * k));
    rs_b[call].upload(matrix(g_rank, s + 6, k * n));
  }
  CUDA(cudaDeviceSynchronize());
  for (int call = 0; call < 2; ++call) {
    tp.ag_gemm(ag_a[call].p, ag_b[call].p, ag_c[call].p, m, n, k, stream);
    tp.gemm_rs(rs_a[call].p, rs_b[call].p, rs_c[call].p, m, n, k, stream);
  }
  tp.check(stream);
  for (int call = 0; call < 2; ++call) {
    const std::uint64_t s = salt + 10 * static_cast<std::uint64_t>(call);
    check_ag("ag_gemm " + shape(m, n, k) + " call " + std::to_string(call), ag_c[call].download(m * n), s, m, n, k);
    check_rs("gemm_rs " + shape(m, n, k) + " call " + std::to_string(call), rs_c[call].download(rows * n), s + 5, m, n, k);
  }
}

// Across nodes: a capture is refused before anything is queued (the capture itself stays valid
// and ends empty), then the same calls outside it still run.
void graph_refused_case(aperture::OverlappedGemm& tp, cudaStream_t stream) {
  const std::size_t rows = 48, n = 128, k = 192, m = rows * static_cast<std::size_t>(g_world);
  tp.reserve(m, n, k);
  Device a(rows * k), b(k * n), c(m * n), ra(m * k), rb(k * n), rc(rows * n);
  const auto refused = [&](const char* what, const std::function<void()>& call) {
    ++g_checks;
    cudaGraph_t graph = nullptr;
    CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
    std::string error;
    aperture::ErrorCode code = aperture::ErrorCode::internal;
    try {
      call();
    } catch (const aperture::Error& e) {
      error = e.what();
      code = e.code();
    }
    CUDA(cudaStreamEndCapture(stream, &graph));
    std::size_t nodes = 1;
    CUDA(cudaGraphGetNodes(graph, nullptr, &nodes));
    CUDA(cudaGraphDestroy(graph));
    if (code != aperture::ErrorCode::unavailable || error.find("CUDA graph") == std::string::npos ||
        error.find("nodes") == std::string::npos || nodes != 0) {
      ++g_failures;
      std::printf("[rank %d] %s captured across nodes: want an unavailable Error naming the CUDA graph and the nodes, "
                  "and an empty capture; got code %d, %zu node(s) captured: %s\n",
                  g_rank, what, static_cast<int>(code), nodes, error.empty() ? "(no error)" : error.c_str());
    }
  };
  refused("ag_gemm", [&] { tp.ag_gemm(a.p, b.p, c.p, m, n, k, stream); });
  refused("gemm_rs", [&] { tp.gemm_rs(ra.p, rb.p, rc.p, m, n, k, stream); });
}

// ag_gemm then gemm_rs captured once into a CUDA graph and replayed on three sets of inputs.
void graph_case(aperture::OverlappedGemm& tp, cudaStream_t stream) {
  const std::size_t rows = 48, n = 128, k = 192, m = rows * static_cast<std::size_t>(g_world);
  tp.reserve(m, n, k);
  Device a(rows * k), b(k * n), c(m * n), ra(m * k), rb(k * n), rc(rows * n);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  tp.ag_gemm(a.p, b.p, c.p, m, n, k, stream);
  tp.gemm_rs(ra.p, rb.p, rc.p, m, n, k, stream);
  CUDA(cudaStreamEndCapture(stream, &graph));
  CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    const std::uint64_t s = 900 + 20 * static_cast<std::uint64_t>(replay);
    a.upload(matrix(g_rank, s, rows * k));
    b.upload(matrix(g_rank, s + 1, k * n));
    ra.upload(matrix(g_rank, s + 5, m * k));
    rb.upload(matrix(g_rank, s + 6, k * n));
    CUDA(cudaDeviceSynchronize());
    CUDA(cudaGraphLaunch(exec, stream));
    tp.check(stream);
    check_ag("graph replay " + std::to_string(replay) + " ag_gemm", c.download(m * n), s, m, n, k);
    check_rs("graph replay " + std::to_string(replay) + " gemm_rs", rc.download(rows * n), s + 5, m, n, k);
  }
  CUDA(cudaGraphExecDestroy(exec));
  CUDA(cudaGraphDestroy(graph));
}

// Every refused shape and pointer: an aperture::Error with ErrorCode::invalid_argument whose
// message names the value; nothing launched (the next good call still works).
void refusal_cases(aperture::OverlappedGemm& tp, cudaStream_t stream) {
  Device x(64 * 64 * 4);
  const std::size_t w = static_cast<std::size_t>(g_world);
  struct Bad { std::size_t m, n, k; const char* names; };
  std::vector<Bad> bad = {{0, 64, 64, "m = 0"}, {w * 2, 100, 64, "n = 100"}, {w * 2, 64, 96, "k = 96"}, {w * 2, 0, 64, "n = 0"}};
  if (g_world > 1) bad.push_back({w * 2 + 1, 64, 64, "m must be a positive multiple"});
  const auto refused = [&](const std::string& what, const char* needle, const std::function<void()>& call) {
    ++g_checks;
    try {
      call();
      ++g_failures;
      std::printf("[rank %d] %s: accepted, want an invalid_argument Error\n", g_rank, what.c_str());
    } catch (const aperture::Error& e) {
      if (e.code() != aperture::ErrorCode::invalid_argument || std::string(e.what()).find(needle) == std::string::npos) {
        ++g_failures;
        std::printf("[rank %d] %s: wrong error (code %d): %s\n", g_rank, what.c_str(), static_cast<int>(e.code()), e.what());
      }
    }
  };
  for (const Bad& s : bad) {
    refused("ag_gemm " + shape(s.m, s.n, s.k), s.names, [&] { tp.ag_gemm(x.p, x.p, x.p, s.m, s.n, s.k, stream); });
    refused("gemm_rs " + shape(s.m, s.n, s.k), s.names, [&] { tp.gemm_rs(x.p, x.p, x.p, s.m, s.n, s.k, stream); });
  }
  refused("ag_gemm null b", "b is null", [&] { tp.ag_gemm(x.p, nullptr, x.p, w, 64, 64, stream); });
  refused("gemm_rs unaligned c_shard", "not 16-byte aligned",
          [&] { tp.gemm_rs(x.p, x.p, reinterpret_cast<bf16*>(reinterpret_cast<char*>(x.p) + 2), w, 64, 64, stream); });
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device here\n");
    return kSkip;
  }
  try {
    aperture::Team team = aperture::Team::from_env();
    g_rank = team.rank();
    g_world = team.size();
    const char* chosen = std::getenv("APERTURE_GPU_PROVIDER");
    const std::string name = chosen != nullptr && *chosen != '\0' ? chosen : "cuda-ipc";
    for (const auto& s : aperture::provider_statuses())
      if (s.name == name && !s.available) {
        std::printf("SKIP: provider %s cannot run here: %s\n", name.c_str(), s.reason.c_str());
        return kSkip;
      }
    auto provider = aperture::make_provider(name, team);
    g_seed = test::agreed_seed(team);
    if (g_rank == 0)
      std::printf("gpu_gemm_test: %d rank(s) on %d node(s) on %s, seed %#" PRIx64 "\n", g_world, team.node_count(), name.c_str(),
                  g_seed);
    // What the registration expects (told by CTest, not read back from the launcher under test):
    // a run meant for two nodes that formed one would test only the fused form.
    const char* expected_text = std::getenv("APERTURE_TEST_EXPECTED_NODES");
    const int expected_nodes = expected_text != nullptr ? std::atoi(expected_text) : team.node_count();
    if (team.node_count() != expected_nodes) {
      std::printf("FAIL gpu_gemm_test: rank %d: the team spans %d node(s), expected %d (APERTURE_TEST_EXPECTED_NODES; "
                  "two nodes need `aperture launch --mpi --nodes 2`)\n", g_rank, team.node_count(), expected_nodes);
      return 1;
    }
    {
      std::unique_ptr<aperture::OverlappedGemm> made;
      try {
        made = std::make_unique<aperture::OverlappedGemm>(*provider, team);
      } catch (const aperture::Error& e) {
        if (std::string(e.what()).find("built without") == std::string::npos) throw;
        std::printf("SKIP: %s\n", e.what());  // a CUDA toolkit without cuBLASLt
        return kSkip;
      }
      aperture::OverlappedGemm& tp = *made;
      cudaStream_t stream = nullptr;
      CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      std::uint64_t salt = 100;
      for (std::size_t rows : {1, 7, 64, 200})
        for (std::size_t n : {64, 192})
          for (std::size_t k : {64, 320}) {
            shape_case(tp, stream, rows, n, k, salt);
            salt += 100;
          }
      if (team.node_count() > 1 && g_world > 1) {
        graph_refused_case(tp, stream);  // unfused across nodes
      } else {
        graph_case(tp, stream);
      }
      refusal_cases(tp, stream);
      shape_case(tp, stream, 32, 64, 128, salt);  // still works after the refusals
      tp.check(stream);
      CUDA(cudaStreamDestroy(stream));
    }
    long long all[2] = {g_checks, g_failures}, sums[2] = {0, 0};
    std::vector<long long> gathered(2 * static_cast<std::size_t>(g_world));
    team.allgather(all, gathered.data(), sizeof all);
    for (int r = 0; r < g_world; ++r) {
      sums[0] += gathered[2 * r];
      sums[1] += gathered[2 * r + 1];
    }
    if (sums[1] != 0) {
      std::printf("FAIL gpu_gemm_test: %lld of %lld checks failed (rank %d: %lld)\n", sums[1], sums[0], g_rank, g_failures);
      return 1;
    }
    if (g_rank == 0) std::printf("PASS gpu_gemm_test: %lld checks\n", sums[0]);
    return 0;
  } catch (const std::exception& e) {
    std::printf("FAIL gpu_gemm_test: rank %d: %s\n", g_rank, e.what());
    return 1;
  }
}
