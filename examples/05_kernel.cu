// examples/05_kernel.cu — a CUDA kernel puts into its right neighbour's GPU memory and signals it.
//
//   aperture launch -n 2 -- build/examples/example_05_kernel
//
// Example 01 on a GPU. The provider is "default" (cuda-ipc where a GPU is usable); the kernel
// takes a PeerView by value and never learns which provider made the memory. Each block puts its
// slice of this rank's values into the right neighbour's copy of a symmetric buffer and then adds
// 1 to the neighbour's flag with a release atomic; one thread waits, bounded, until all of the
// left neighbour's blocks have arrived. The host then copies the buffer back and checks every
// element. Where there is no GPU it prints "SKIP: no GPU" and exits 77.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include <aperture/aperture.h>

namespace {

constexpr int kCount = 1 << 16;  // elements per rank
constexpr int kBlocks = 4;
constexpr int kThreads = 256;
constexpr std::uint64_t kWaitNs = 20'000'000'000;  // a lost neighbour fails the run instead of hanging it

struct Mailbox {
  std::uint64_t arrived;  // blocks of the left neighbour whose data has landed here
  std::int32_t data[kCount];
};

__host__ __device__ std::int32_t value_from(int rank, int i) { return rank * 1000000 + i; }

void cuda_check(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(rc));
}

// `outgoing` is ordinary device memory of this rank: only the destination must be symmetric.
__global__ void send_right(aperture::PeerView peers, Mailbox* box, const std::int32_t* outgoing, int* timed_out) {
  const int right = (peers.rank + 1) % peers.world_size;
  constexpr int kSlice = kCount / kBlocks;
  constexpr int kChunk = kSlice / kThreads;  // each thread puts a contiguous chunk
  const int first = blockIdx.x * kSlice + threadIdx.x * kChunk;
  peers.put(&box->data[first], &outgoing[first], kChunk, right);
  __syncthreads();  // the whole block's puts come before its signal
  if (threadIdx.x == 0)
    peers.atomic_add(&box->arrived, std::uint64_t{1}, right, aperture::order::release);

  if (blockIdx.x == 0 && threadIdx.x == 0) {
    std::uint64_t seen = 0;  // acquire: the left neighbour's puts are visible once it returns true
    if (!aperture::wait_until_ge_for(&box->arrived, kBlocks, kWaitNs, &seen)) *timed_out = static_cast<int>(seen) + 1;
  }
}

}  // namespace

int main() try {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no GPU\n");
    return 77;
  }
  aperture::Team team = aperture::Team::from_env();
  auto provider = aperture::make_provider("default", team);  // collective; selects this rank's GPU
  if (provider->memory_kind() != aperture::MemoryKind::device) {
    std::printf("SKIP: no GPU provider usable here (default is %s)\n", std::string(provider->name()).c_str());
    return 77;
  }
  const int me = team.rank();
  const int left = (me + team.size() - 1) % team.size();

  aperture::Allocation allocation = provider->allocate(sizeof(Mailbox));  // collective
  auto* box = allocation.as<Mailbox>();
  cuda_check(cudaMemset(box, 0, sizeof(Mailbox)), "cudaMemset");

  std::vector<std::int32_t> values(kCount);
  for (int i = 0; i < kCount; ++i) values[i] = value_from(me, i);
  std::int32_t* outgoing = nullptr;
  int* timed_out = nullptr;
  cuda_check(cudaMalloc(&outgoing, sizeof(std::int32_t) * kCount), "cudaMalloc");
  cuda_check(cudaMalloc(&timed_out, sizeof(int)), "cudaMalloc");
  cuda_check(cudaMemcpy(outgoing, values.data(), sizeof(std::int32_t) * kCount, cudaMemcpyHostToDevice), "cudaMemcpy");
  cuda_check(cudaMemset(timed_out, 0, sizeof(int)), "cudaMemset");
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  team.barrier();  // every flag is 0 before any kernel signals

  send_right<<<kBlocks, kThreads>>>(allocation.map.peer_view(), box, outgoing, timed_out);
  cuda_check(cudaGetLastError(), "send_right launch");
  cuda_check(cudaDeviceSynchronize(), "send_right");

  int waited = 0;
  std::vector<std::int32_t> received(kCount);
  cuda_check(cudaMemcpy(&waited, timed_out, sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cuda_check(cudaMemcpy(received.data(), box->data, sizeof(std::int32_t) * kCount, cudaMemcpyDeviceToHost),
             "cudaMemcpy");
  int wrong = 0;
  if (waited) {
    ++wrong;
    std::fprintf(stderr, "rank %d: waited in vain; %d of %d blocks arrived\n", me, waited - 1, kBlocks);
  }
  for (int i = 0; i < kCount; ++i) {
    if (received[i] != value_from(left, i) && wrong++ == 0)
      std::fprintf(stderr, "rank %d: data[%d] = %d, expected %d (from rank %d)\n", me, i, received[i],
                   value_from(left, i), left);
  }
  std::printf("rank %d/%d (%s): received %d values from rank %d in a kernel: %s\n", me, team.size(),
              std::string(provider->name()).c_str(), kCount, left, wrong ? "WRONG" : "ok");

  team.barrier();  // nobody frees while a neighbour's kernel may still write
  cuda_check(cudaFree(outgoing), "cudaFree");
  cuda_check(cudaFree(timed_out), "cudaFree");
  provider->free(allocation);  // collective
  return wrong ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "example_05_kernel: %s\n", e.what());
  return 1;
}
