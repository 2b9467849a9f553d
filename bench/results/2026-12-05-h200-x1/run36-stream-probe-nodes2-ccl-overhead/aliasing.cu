// Session 39 probe: can the work that would release a spinning kernel (a kernel, or an H2D copy, on
// a non-blocking stream of its own: what the message engine does to apply another node's put) be
// held behind what the program queued after the spinner on the legacy stream? Part A issues
// everything from one thread (async D2H copy into pinned memory behind the spinner). Part B is the
// engine's shape: the main thread blocks in a call (a pageable cudaMemcpy D2H behind the spinner,
// like torch's .cpu(); or cudaDeviceSynchronize, like torch.cuda.synchronize()), and a second
// thread releases the spinner 50 ms later and synchronizes its stream. Every wait is bounded: the
// spinner gives up after 0.5 s.
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

__device__ unsigned long long now_ns() { unsigned long long t; asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t)); return t; }

// Spins until *word != 0 or 0.5 s passes; writes 1 (released) or 2 (timed out) into *outcome.
__global__ void spin(volatile int* word, int* outcome) {
  const unsigned long long start = now_ns();
  while (*word == 0) {
    if (now_ns() - start > 500000000ull) { *outcome = 2; return; }
  }
  *outcome = 1;
}
__global__ void set_word(int* word) { atomicExch(word, 1); }

int main() {
  int *word, *outcome, *scratch, *host_out, *host_one;
  cudaMalloc(&word, 4); cudaMalloc(&outcome, 4); cudaMalloc(&scratch, 1 << 20);
  cudaHostAlloc(&host_out, 1 << 20, cudaHostAllocDefault); cudaHostAlloc(&host_one, 4, cudaHostAllocDefault);
  std::vector<int> pageable(1 << 18);
  *host_one = 1;
  const int kStreams = 10;
  std::vector<cudaStream_t> streams(kStreams);
  for (auto& s : streams) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  const char* env = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  printf("CUDA_DEVICE_MAX_CONNECTIONS=%s\n", env ? env : "(unset)");
  auto release = [&](int k, bool by_copy) {
    if (by_copy) cudaMemcpyAsync(word, host_one, 4, cudaMemcpyHostToDevice, streams[k]);
    else set_word<<<1, 1, 0, streams[k]>>>(word);
    cudaStreamSynchronize(streams[k]);
  };
  const char* behind_names[] = {"nothing", "async D2H into pinned memory", "blocking pageable cudaMemcpy D2H (other thread releases)",
                                "cudaDeviceSynchronize (other thread releases)"};
  for (int behind = 0; behind < 4; ++behind)
    for (int by_copy = 0; by_copy < 2; ++by_copy) {
      printf("behind the spinner: %s; released by %s; stuck on stream k:", behind_names[behind], by_copy ? "an H2D copy" : "a kernel");
      int stuck = 0;
      double slowest = 0;
      for (int k = 0; k < kStreams; ++k) {
        cudaMemset(word, 0, 4); cudaMemset(outcome, 0, 4); cudaDeviceSynchronize();
        const auto began = std::chrono::steady_clock::now();
        spin<<<1, 1>>>(word, outcome);  // legacy stream
        if (behind <= 1) {
          if (behind == 1) cudaMemcpyAsync(host_out, scratch, 1 << 20, cudaMemcpyDeviceToHost, 0);
          release(k, by_copy);
          cudaDeviceSynchronize();
        } else {
          std::thread releaser([&] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); release(k, by_copy); });
          if (behind == 2) cudaMemcpy(pageable.data(), scratch, 1 << 20, cudaMemcpyDeviceToHost);
          else cudaDeviceSynchronize();
          releaser.join();
          cudaDeviceSynchronize();
        }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
        if (s > slowest) slowest = s;
        int got = 0; cudaMemcpy(&got, outcome, 4, cudaMemcpyDeviceToHost);
        if (got != 1) { printf(" %d", k); ++stuck; }
      }
      printf("  -> %d of %d stuck, slowest %.3f s (%s)\n", stuck, kStreams, slowest, cudaGetErrorString(cudaGetLastError()));
    }
  return 0;
}
