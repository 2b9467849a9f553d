// tests/conformance/device_memory_accessor.cu — MemoryAccessor for device memory: filled and read
// with cudaMemcpy, driven by small kernels that call the operations of peer_operations.h with one
// worker per thread. Kernels are launched on the default stream, in order; finish() waits.
#include <cuda_runtime.h>

#include "../common/gpu_reach.h"
#include "memory_accessor.h"
#include "peer_operations.h"
#include "common/cuda_check.h"  // APERTURE_CUDA_CHECK: the library's CUDA error translation

namespace conformance {
namespace {

constexpr int kBlocks = 32;
constexpr int kThreads = 256;
constexpr int kRingThreads = 512;  // one block: its thread 0 signals after every store (__syncthreads)

__device__ inline std::size_t worker() { return blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; }
__device__ inline std::size_t workers() { return static_cast<std::size_t>(gridDim.x) * blockDim.x; }

template <class T>
__global__ void fill_kernel(T* data, std::size_t count, int rank, int salt) {
  ops::fill(worker(), workers(), data, count, rank, salt);
}
template <class T>
__global__ void store_kernel(T* inbox, std::size_t count, int me, int n, const std::int64_t* table, int salt) {
  ops::store_to_peers(worker(), workers(), inbox, count, me, n, table, salt);
}
template <class T>
__global__ void load_kernel(T* result, const T* src, std::size_t count, int me, int n, const std::int64_t* table) {
  ops::load_from_peers(worker(), workers(), result, src, count, me, n, table);
}
template <class T>
__global__ void put_kernel(T* inbox, const T* src, std::size_t count, int me, int n, const std::int64_t* table) {
  ops::put_to_peers(worker(), workers(), inbox, src, count, me, n, table);
}
template <class T>
__global__ void get_kernel(T* result, const T* src, std::size_t count, int me, int n, const std::int64_t* table) {
  ops::get_from_peers(worker(), workers(), result, src, count, me, n, table);
}
template <class T>
__global__ void copy_kernel(T* inbox, const T* src, std::size_t count, int me, int n, const std::int64_t* table) {
  ops::copy_between_peers(worker(), workers(), inbox, src, count, me, n, table);
}
__global__ void atomics_kernel(std::int64_t* words, int me, int n, const std::int64_t* table, std::int64_t* cas_seen,
                               std::int64_t* xchg_seen) {
  ops::atomics_to_peers(worker(), words, me, n, table, cas_seen, xchg_seen);
}
__global__ void view_kernel(std::int64_t* view, std::size_t count, int me, int n, const std::int64_t* view_table,
                            const std::int64_t* whole_table, unsigned long long* disagreements) {
  const unsigned long long mine =
      ops::store_through_view(worker(), workers(), view, count, me, n, view_table, whole_table);
  if (mine != 0) atomicAdd(disagreements, mine);
}
__global__ void relay_kernel(const std::int64_t* in, const std::int64_t* in_table, std::int64_t* out,
                             const std::int64_t* out_table, std::size_t count, int me, int n, std::int64_t add) {
  ops::relay(worker(), workers(), in, in_table, out, out_table, count, me, n, add);
}
// One block: every thread stores, thread 0 signals after all of them (release), waits (acquire,
// bounded) and then every thread checks what arrived.
__global__ void ring_kernel(aperture::PeerView peers, std::int64_t* data, std::size_t count, std::uint64_t* flag,
                            std::uint64_t round, RingOutcome* outcome) {
  ops::ring_store(threadIdx.x, blockDim.x, peers, data, count, round);
  __syncthreads();
  __shared__ int arrived;
  if (threadIdx.x == 0) {
    __threadfence_system();
    peers.signal(flag, round, (peers.rank + 1) % peers.world_size);
    std::uint64_t seen = 0;
    arrived = aperture::wait_until_ge_for(flag, round, ops::kWaitTimeoutNs, &seen) ? 1 : 0;
    if (!arrived) atomicAdd(&outcome->timeouts, 1ull);
  }
  __syncthreads();
  if (!arrived) return;
  const unsigned long long wrong = ops::ring_wrong(threadIdx.x, blockDim.x, peers, data, count, round);
  if (wrong != 0) atomicAdd(&outcome->wrong, wrong);
}

// The launch itself failed (bad configuration, a sticky error from an earlier kernel).
void launched(const char* kernel) {
  aperture::detail::check_cuda(cudaGetLastError(), kernel, __FILE__, __LINE__, "conformance kernel launch");
}

class DeviceMemoryAccessor final : public MemoryAccessor {
 public:
  std::string where() const override { return "device"; }
  int workers() const override { return kBlocks * kThreads; }
  void finish() override { APERTURE_CUDA_CHECK(cudaDeviceSynchronize(), "conformance"); }

  void write(void* dst, const void* host_src, std::size_t bytes) override {
    APERTURE_CUDA_CHECK(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice), "conformance");
  }
  void read(void* host_dst, const void* src, std::size_t bytes) const override {
    APERTURE_CUDA_CHECK(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost), "conformance");
  }
  void zero(void* dst, std::size_t bytes) override { APERTURE_CUDA_CHECK(cudaMemset(dst, 0, bytes), "conformance"); }
  void* scratch(std::size_t bytes) override {
    void* p = nullptr;
    APERTURE_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "conformance");
    APERTURE_CUDA_CHECK(cudaMemset(p, 0, bytes == 0 ? 1 : bytes), "conformance");
    return p;
  }
  void release(void* scratch) override { APERTURE_CUDA_CHECK(cudaFree(scratch), "conformance"); }
  std::size_t device_bytes_free() const override { return memory_info().free; }
  std::size_t device_bytes_in_use() const override {
    const MemoryInfo info = memory_info();
    return info.total - info.free;
  }
  struct MemoryInfo {
    std::size_t free = 0;
    std::size_t total = 0;
  };
  static MemoryInfo memory_info() {
    MemoryInfo info;
    APERTURE_CUDA_CHECK(cudaMemGetInfo(&info.free, &info.total), "conformance");
    return info;
  }
  bool is_local(const void* p) const override {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
      (void)cudaGetLastError();  // not sticky: clear it, so later launch checks see their own
      return false;
    }
    return attributes.type == cudaMemoryTypeDevice && attributes.device == current_device();
  }
  int device_count() const override {
    int count = 0;
    APERTURE_CUDA_CHECK(cudaGetDeviceCount(&count), "conformance");
    return count;
  }
  std::vector<std::uint8_t> expected_reach(aperture::Team& team) const override {
    return test::expected_gpu_reach(team);
  }
  int current_device() const override {
    int device = -1;
    APERTURE_CUDA_CHECK(cudaGetDevice(&device), "conformance");
    return device;
  }

  void fill(Element e, void* data, std::size_t count, int rank, int salt) override {
    ops::with_element(e, [&](auto t) {
      fill_kernel<<<kBlocks, kThreads>>>(static_cast<decltype(t)*>(data), count, rank, salt);
    });
    launched("fill");
  }
  void store_to_peers(Element e, void* inbox, std::size_t count, int me, int n, const std::int64_t* table,
                      int salt) override {
    ops::with_element(e, [&](auto t) {
      store_kernel<<<kBlocks, kThreads>>>(static_cast<decltype(t)*>(inbox), count, me, n, table, salt);
    });
    launched("store_to_peers");
  }
  void load_from_peers(Element e, void* result, const void* src, std::size_t count, int me, int n,
                       const std::int64_t* table) override {
    ops::with_element(e, [&](auto t) {
      using T = decltype(t);
      load_kernel<<<kBlocks, kThreads>>>(static_cast<T*>(result), static_cast<const T*>(src), count, me, n, table);
    });
    launched("load_from_peers");
  }
  void put_to_peers(Element e, void* inbox, const void* src, std::size_t count, int me, int n,
                    const std::int64_t* table) override {
    ops::with_element(e, [&](auto t) {
      using T = decltype(t);
      put_kernel<<<kBlocks, kThreads>>>(static_cast<T*>(inbox), static_cast<const T*>(src), count, me, n, table);
    });
    launched("put_to_peers");
  }
  void get_from_peers(Element e, void* result, const void* src, std::size_t count, int me, int n,
                      const std::int64_t* table) override {
    ops::with_element(e, [&](auto t) {
      using T = decltype(t);
      get_kernel<<<kBlocks, kThreads>>>(static_cast<T*>(result), static_cast<const T*>(src), count, me, n, table);
    });
    launched("get_from_peers");
  }
  void copy_between_peers(Element e, void* inbox, const void* src, std::size_t count, int me, int n,
                          const std::int64_t* table) override {
    ops::with_element(e, [&](auto t) {
      using T = decltype(t);
      copy_kernel<<<kBlocks, kThreads>>>(static_cast<T*>(inbox), static_cast<const T*>(src), count, me, n, table);
    });
    launched("copy_between_peers");
  }
  void atomics_to_peers(std::int64_t* words, int me, int n, const std::int64_t* table, std::int64_t* cas_seen,
                        std::int64_t* xchg_seen) override {
    atomics_kernel<<<kBlocks, kThreads>>>(words, me, n, table, cas_seen, xchg_seen);
    launched("atomics_to_peers");
  }
  unsigned long long store_through_view(std::int64_t* view, std::size_t count, int me, int n,
                                        const std::int64_t* view_table, const std::int64_t* whole_table) override {
    auto* counter = static_cast<unsigned long long*>(scratch(sizeof(unsigned long long)));
    view_kernel<<<kBlocks, kThreads>>>(view, count, me, n, view_table, whole_table, counter);
    launched("store_through_view");
    unsigned long long disagreements = 0;
    read(&disagreements, counter, sizeof disagreements);  // waits for the kernel
    release(counter);
    return disagreements;
  }
  RingOutcome signal_ring(aperture::PeerView peers, std::int64_t* data, std::size_t count, std::uint64_t* flag,
                          std::uint64_t round) override {
    auto* outcome = static_cast<RingOutcome*>(scratch(sizeof(RingOutcome)));
    ring_kernel<<<1, kRingThreads>>>(peers, data, count, flag, round, outcome);
    launched("signal_ring");
    RingOutcome result;
    read(&result, outcome, sizeof result);  // waits for the kernel
    release(outcome);
    return result;
  }
  void relay(const std::int64_t* in, const std::int64_t* in_table, std::int64_t* out, const std::int64_t* out_table,
             std::size_t count, int me, int n, std::int64_t add) override {
    relay_kernel<<<kBlocks, kThreads>>>(in, in_table, out, out_table, count, me, n, add);
    launched("relay");
  }
};

}  // namespace

std::unique_ptr<MemoryAccessor> make_device_accessor(std::string& why) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0) {
    why = "no GPU here (" +
          (rc != cudaSuccess ? aperture::detail::cuda_error_text(rc) : std::string("cudaGetDeviceCount reported 0")) +
          ")";
    (void)cudaGetLastError();
    return nullptr;
  }
  return std::make_unique<DeviceMemoryAccessor>();
}

}  // namespace conformance
