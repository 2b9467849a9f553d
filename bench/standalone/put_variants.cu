// bench/standalone/put_variants.cu — how fast can SMs move bytes to a peer GPU, against the copy engine?
//
// A stand-alone measurement behind bench/results/2026-11-30-h200-x2/NOTES.md ("Point to point"): GPU 0 puts into and
// gets from GPU 1's memory (peer access in one process, no aperture code), with 16-byte
// vector loads/stores in several grid shapes and layouts, and with Hopper's bulk copies (TMA:
// cp.async.bulk global -> shared -> peer global, mbarrier-completed, 2-6 stages), then both
// directions at once. Needs two GPUs with peer access and sm_90:
//
//     build/bench/bench_put_variants      (built with CUDA; or by hand:)
//     nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/put_variants bench/standalone/put_variants.cu && /tmp/put_variants
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <chrono>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1);} } while (0)

// Threads copy [begin, end) with stride `stride`, INFLIGHT 16-byte loads before their stores.
template <int INFLIGHT>
__device__ void strided_copy(uint4* __restrict__ d, const uint4* __restrict__ s, uint64_t i, uint64_t end,
                             uint64_t stride) {
  for (; i + (INFLIGHT - 1) * stride < end; i += INFLIGHT * stride) {
    uint4 v[INFLIGHT];
#pragma unroll
    for (int k = 0; k < INFLIGHT; ++k) v[k] = s[i + k * stride];
#pragma unroll
    for (int k = 0; k < INFLIGHT; ++k) d[i + k * stride] = v[k];
  }
  for (; i < end; i += stride) d[i] = s[i];
}

// Grid-stride: neighbouring threads of the whole grid take neighbouring vectors.
template <int INFLIGHT>
__global__ void __launch_bounds__(512) vec_copy(uint4* __restrict__ d, const uint4* __restrict__ s, uint64_t n) {
  strided_copy<INFLIGHT>(d, s, (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, n, (uint64_t)gridDim.x * blockDim.x);
}

// Blocked: each block copies one contiguous slice.
template <int INFLIGHT>
__global__ void __launch_bounds__(512) vec_copy_blocked(uint4* __restrict__ d, const uint4* __restrict__ s, uint64_t n) {
  const uint64_t per = (n + gridDim.x - 1) / gridDim.x;
  const uint64_t begin = blockIdx.x * per;
  strided_copy<INFLIGHT>(d, s, begin + threadIdx.x, min(n, begin + per), blockDim.x);
}

// TMA bulk copies: global -> shared (mbarrier-completed) -> peer global (bulk_group), STAGES
// buffers of CHUNK bytes, the loads issued STAGES chunks ahead.
template <int STAGES, int CHUNK>
__global__ void tma_copy_pipe(unsigned char* d, const unsigned char* s, uint64_t bytes) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t bar[STAGES];
  if (threadIdx.x != 0) return;
  const uint64_t chunks = bytes / CHUNK;
  for (int k = 0; k < STAGES; ++k) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(&bar[k]);
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(a));
  }
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  const uint64_t mine = chunks > blockIdx.x ? (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  auto load = [&](uint64_t j) {
    const int k = j % STAGES;
    const uint64_t c = blockIdx.x + j * gridDim.x;
    uint32_t sb = (uint32_t)__cvta_generic_to_shared(smem + (size_t)k * CHUNK);
    uint32_t ba = (uint32_t)__cvta_generic_to_shared(&bar[k]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(ba), "r"(CHUNK) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(sb), "l"(s + c * CHUNK), "r"(CHUNK), "r"(ba) : "memory");
  };
  for (uint64_t j = 0; j < mine && j < STAGES; ++j) load(j);
  for (uint64_t j = 0; j < mine; ++j) {
    const int k = j % STAGES;
    uint32_t ba = (uint32_t)__cvta_generic_to_shared(&bar[k]);
    uint32_t parity = (j / STAGES) & 1;
    uint32_t done = 0;
    while (!done)
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                   : "=r"(done) : "r"(ba), "r"(parity) : "memory");
    const uint64_t c = blockIdx.x + j * gridDim.x;
    uint32_t sb = (uint32_t)__cvta_generic_to_shared(smem + (size_t)k * CHUNK);
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(d + c * CHUNK), "r"(sb), "r"(CHUNK) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    if (j + STAGES < mine) {
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");  // buffer k free again
      load(j + STAGES);
    }
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

template <class F>
float time_it(F f, int iters) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  f(); f(); CK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int trial = 0; trial < 5; ++trial) {
    CK(cudaEventRecord(a));
    for (int i = 0; i < iters; ++i) f();
    CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms * 1000 / iters);
  }
  std::sort(t.begin(), t.end());
  CK(cudaGetLastError());
  return t[2];
}

int main() {
  CK(cudaSetDevice(0));
  CK(cudaDeviceEnablePeerAccess(1, 0));
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const uint64_t sizes[] = {16ull << 20, 256ull << 20, 1ull << 30};
  unsigned char *local, *remote, *local2;
  const uint64_t maxb = 1ull << 30;
  CK(cudaMalloc(&local, maxb)); CK(cudaMalloc(&local2, maxb));
  CK(cudaSetDevice(1)); CK(cudaMalloc(&remote, maxb)); CK(cudaDeviceEnablePeerAccess(0, 0)); CK(cudaSetDevice(0));
  CK(cudaMemset(local, 1, maxb));
  // correctness check for TMA
  CK(cudaFuncSetAttribute(tma_copy_pipe<4, 32768>, cudaFuncAttributeMaxDynamicSharedMemorySize, 4 * 32768));
  CK(cudaFuncSetAttribute(tma_copy_pipe<6, 32768>, cudaFuncAttributeMaxDynamicSharedMemorySize, 6 * 32768));
  CK(cudaFuncSetAttribute(tma_copy_pipe<3, 65536>, cudaFuncAttributeMaxDynamicSharedMemorySize, 3 * 65536));
  {
    std::vector<uint32_t> h(1 << 22);
    for (size_t i = 0; i < h.size(); ++i) h[i] = (uint32_t)(i * 2654435761u);
    CK(cudaMemcpy(local, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(remote, 0, h.size() * 4));
    tma_copy_pipe<4, 32768><<<sms, 32, 4 * 32768>>>(remote, local, h.size() * 4);
    CK(cudaDeviceSynchronize());
    std::vector<uint32_t> g(h.size());
    CK(cudaMemcpy(g.data(), remote, g.size() * 4, cudaMemcpyDeviceToHost));
    printf("tma_pipe correctness: %s\n", g == h ? "ok" : "WRONG");
  }
  for (uint64_t n : sizes) {
    const int iters = n >= (1ull << 30) ? 5 : n >= (256ull << 20) ? 10 : 50;
    const uint64_t v = n / 16;
    auto gbps = [&](float us) { return n / us / 1e3; };
    float ce = time_it([&] { CK(cudaMemcpyAsync(remote, local, n, cudaMemcpyDeviceToDevice)); }, iters);
    float ce_get = time_it([&] { CK(cudaMemcpyAsync(local2, remote, n, cudaMemcpyDeviceToDevice)); }, iters);
    printf("\n%llu MiB: copy engine put %.1f GB/s, get %.1f GB/s\n", (unsigned long long)(n >> 20), gbps(ce), gbps(ce_get));
    auto row = [&](const char* name, float us) { printf("  %-40s %8.1f GB/s  %.3fx CE\n", name, gbps(us), ce / us); };
    row("vec4 132x512 grid-stride (current)", time_it([&] { vec_copy<4><<<sms, 512>>>((uint4*)remote, (const uint4*)local, v); }, iters));
    row("vec8 132x512", time_it([&] { vec_copy<8><<<sms, 512>>>((uint4*)remote, (const uint4*)local, v); }, iters));
    row("vec4 264x512", time_it([&] { vec_copy<4><<<2 * sms, 512>>>((uint4*)remote, (const uint4*)local, v); }, iters));
    row("vec4 528x256", time_it([&] { vec_copy<4><<<4 * sms, 256>>>((uint4*)remote, (const uint4*)local, v); }, iters));
    row("vec4 32x512", time_it([&] { vec_copy<4><<<32, 512>>>((uint4*)remote, (const uint4*)local, v); }, iters));
    row("vec4 64x512", time_it([&] { vec_copy<4><<<64, 512>>>((uint4*)remote, (const uint4*)local, v); }, iters));
    row("blocked vec4 132x512", time_it([&] { vec_copy_blocked<4><<<sms, 512>>>((uint4*)remote, (const uint4*)local, v); }, iters));
    row("tma pipe 4x32K 132", time_it([&] { tma_copy_pipe<4, 32768><<<sms, 32, 4 * 32768>>>(remote, local, n); }, iters));
    row("tma pipe 6x32K 132", time_it([&] { tma_copy_pipe<6, 32768><<<sms, 32, 6 * 32768>>>(remote, local, n); }, iters));
    row("tma pipe 3x64K 132", time_it([&] { tma_copy_pipe<3, 65536><<<sms, 32, 3 * 65536>>>(remote, local, n); }, iters));
    row("tma pipe 4x32K 64", time_it([&] { tma_copy_pipe<4, 32768><<<64, 32, 4 * 32768>>>(remote, local, n); }, iters));
    row("tma pipe 4x32K 264", time_it([&] { tma_copy_pipe<4, 32768><<<2 * sms, 32, 4 * 32768>>>(remote, local, n); }, iters));
    printf("  get (remote -> local):\n");
    row("get vec4 132x512", time_it([&] { vec_copy<4><<<sms, 512>>>((uint4*)local2, (const uint4*)remote, v); }, iters));
    row("get vec8 264x512", time_it([&] { vec_copy<8><<<2 * sms, 512>>>((uint4*)local2, (const uint4*)remote, v); }, iters));
    row("get tma pipe 4x32K 132", time_it([&] { tma_copy_pipe<4, 32768><<<sms, 32, 4 * 32768>>>(local2, remote, n); }, iters));
    row("get tma pipe 6x32K 132", time_it([&] { tma_copy_pipe<6, 32768><<<sms, 32, 6 * 32768>>>(local2, remote, n); }, iters));
  }

  // Bidirectional: GPU0 -> GPU1 and GPU1 -> GPU0 at once (what the bench does: every rank puts).
  {
    unsigned char *src1, *dst0;
    CK(cudaSetDevice(1)); CK(cudaMalloc(&src1, maxb)); CK(cudaMemset(src1, 2, maxb));
    CK(cudaFuncSetAttribute(tma_copy_pipe<4, 32768>, cudaFuncAttributeMaxDynamicSharedMemorySize, 4 * 32768));
    cudaStream_t s1; CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaSetDevice(0)); dst0 = local2;
    cudaStream_t s0; CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    for (uint64_t n : {256ull << 20, 1ull << 30}) {
      const int iters = 10;
      const uint64_t v = n / 16;
      auto both = [&](auto launch) {
        // time on both devices with host wall clock after sync
        CK(cudaDeviceSynchronize()); CK(cudaSetDevice(1)); CK(cudaDeviceSynchronize()); CK(cudaSetDevice(0));
        std::vector<double> t;
        for (int trial = 0; trial < 5; ++trial) {
          auto t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < iters; ++i) { CK(cudaSetDevice(0)); launch(0, s0); CK(cudaSetDevice(1)); launch(1, s1); }
          CK(cudaSetDevice(0)); CK(cudaStreamSynchronize(s0)); CK(cudaSetDevice(1)); CK(cudaStreamSynchronize(s1)); CK(cudaSetDevice(0));
          t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters);
        }
        std::sort(t.begin(), t.end());
        CK(cudaGetLastError());
        return t[2];
      };
      auto dst = [&](int dev) { return dev == 0 ? remote : dst0; };
      auto src = [&](int dev) { return dev == 0 ? local : src1; };
      double ce = both([&](int dev, cudaStream_t st) { CK(cudaMemcpyAsync(dst(dev), src(dev), n, cudaMemcpyDeviceToDevice, st)); });
      printf("\nbidirectional %llu MiB (GB/s per direction): copy engine %.1f\n", (unsigned long long)(n >> 20), n / ce / 1e3);
      auto row = [&](const char* name, double us) { printf("  %-40s %8.1f GB/s  %.3fx CE\n", name, n / us / 1e3, ce / us); };
      row("vec4 132x512", both([&](int dev, cudaStream_t st) { vec_copy<4><<<sms, 512, 0, st>>>((uint4*)dst(dev), (const uint4*)src(dev), v); }));
      row("vec4 66x512", both([&](int dev, cudaStream_t st) { vec_copy<4><<<sms / 2, 512, 0, st>>>((uint4*)dst(dev), (const uint4*)src(dev), v); }));
      row("vec4 32x512", both([&](int dev, cudaStream_t st) { vec_copy<4><<<32, 512, 0, st>>>((uint4*)dst(dev), (const uint4*)src(dev), v); }));
      row("tma pipe 4x32K 132", both([&](int dev, cudaStream_t st) { tma_copy_pipe<4, 32768><<<sms, 32, 4 * 32768, st>>>(dst(dev), src(dev), n); }));
      row("tma pipe 4x32K 66", both([&](int dev, cudaStream_t st) { tma_copy_pipe<4, 32768><<<sms / 2, 32, 4 * 32768, st>>>(dst(dev), src(dev), n); }));
      row("tma pipe 4x32K 32", both([&](int dev, cudaStream_t st) { tma_copy_pipe<4, 32768><<<32, 32, 4 * 32768, st>>>(dst(dev), src(dev), n); }));
      row("tma pipe 4x32K 16", both([&](int dev, cudaStream_t st) { tma_copy_pipe<4, 32768><<<16, 32, 4 * 32768, st>>>(dst(dev), src(dev), n); }));
    }
  }
  return 0;
}
