// bench/standalone/flag_latency.cu — one-way latency of a flag ping-pong between two GPUs, by memory order.
//
// A stand-alone measurement behind bench/results/2026-11-30-h200-x2/NOTES.md ("Ping-pong"): one thread on each of two
// peer-accessible GPUs (one process) bounces a counter 20,000 times through the other GPU's
// memory, with the flag stored and polled as release/acquire at system scope (what
// aperture::signal / wait_until_ge promise), relaxed, volatile, or with separate fences. No
// aperture code: it tells what the hardware costs, so the library's figure can be read against it.
//
//     build/bench/bench_flag_latency      (built with CUDA; or by hand:)
//     nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/flag_latency bench/standalone/flag_latency.cu && /tmp/flag_latency
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <chrono>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

template <int MODE>
__device__ void send(uint64_t* p, uint64_t v) {
  if (MODE == 0) asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  if (MODE == 1) asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  if (MODE == 2) asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  if (MODE == 3) { asm volatile("fence.acq_rel.sys;" ::: "memory"); asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory"); }
  if (MODE == 4) asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
template <int MODE>
__device__ void wait(uint64_t* p, uint64_t v) {
  uint64_t s = 0;
  if (MODE == 0) do asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(s) : "l"(p) : "memory"); while (s < v);
  if (MODE == 1) do asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(s) : "l"(p) : "memory"); while (s < v);
  if (MODE == 2) do asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(s) : "l"(p) : "memory"); while (s < v);
  if (MODE == 3 || MODE == 4) { do asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(s) : "l"(p) : "memory"); while (s < v); asm volatile("fence.acq_rel.sys;" ::: "memory"); }
}
template <int MODE>
__global__ void pp(uint64_t* mine, uint64_t* theirs, bool first, uint64_t base, int rounds) {
  for (int i = 1; i <= rounds; ++i) {
    uint64_t v = base + i;
    if (first) { send<MODE>(theirs, v); wait<MODE>(mine, v); } else { wait<MODE>(mine, v); send<MODE>(theirs, v); }
  }
}
int main() {
  uint64_t *f0, *f1;
  CK(cudaSetDevice(0)); CK(cudaDeviceEnablePeerAccess(1, 0)); CK(cudaMalloc(&f0, 4096)); CK(cudaMemset(f0, 0, 4096));
  cudaStream_t s0; CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CK(cudaSetDevice(1)); CK(cudaDeviceEnablePeerAccess(0, 0)); CK(cudaMalloc(&f1, 4096)); CK(cudaMemset(f1, 0, 4096));
  cudaStream_t s1; CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  uint64_t base = 0;
  const int rounds = 20000;
  auto run = [&](const char* name, auto k0, auto k1) {
    for (int trial = 0; trial < 3; ++trial) {
      CK(cudaSetDevice(0)); k0<<<1, 1, 0, s0>>>(f0, f1, true, base, rounds);
      CK(cudaSetDevice(1)); k1<<<1, 1, 0, s1>>>(f1, f0, false, base, rounds);
      auto t0 = std::chrono::steady_clock::now();
      CK(cudaSetDevice(0)); CK(cudaStreamSynchronize(s0)); CK(cudaSetDevice(1)); CK(cudaStreamSynchronize(s1));
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      base += rounds;
      if (trial == 2) printf("%-44s one way %.3f us (upper bound incl. launch skew)\n", name, us / rounds / 2);
    }
  };
  run("st.release.sys / ld.acquire.sys", pp<0>, pp<0>);
  run("st.relaxed.sys / ld.relaxed.sys", pp<1>, pp<1>);
  run("st.volatile / ld.volatile", pp<2>, pp<2>);
  run("fence.acq_rel.sys+st.relaxed / ld.relaxed+fence", pp<3>, pp<3>);
  run("st.release.sys / ld.relaxed+fence", pp<4>, pp<4>);
  return 0;
}
