// examples/06_collectives.cu — all-reduce and all-gather on GPU memory through a Communicator.
//
//   aperture launch -n 2 -- build/examples/example_06_collectives
//
// A Communicator takes its scratch from any provider (here "default": cuda-ipc where a GPU is
// usable) and runs the collectives as kernels on a stream. The user's buffers are ordinary
// device memory; only the scratch is symmetric. Two sizes are run: a small one (the push path,
// no barrier) and a large one (the staged algorithms). Every element of every result is checked
// on the host against the value computed there. Where there is no GPU it prints "SKIP: no GPU"
// and exits 77.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include <aperture/aperture.h>
#include <aperture/collectives/communicator.h>

namespace {

void cuda_check(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(rc));
}

// Rank `rank`'s element i: distinct per rank and element, and every sum over ranks is exact in float.
float input_of(int rank, std::size_t i) { return float(rank * 4096 + i % 4096); }

// A device buffer of `count` elements; freed when it goes.
template <class T>
struct DeviceBuffer {
  T* p = nullptr;
  std::size_t count = 0;
  explicit DeviceBuffer(std::size_t n) : count(n) { cuda_check(cudaMalloc(&p, sizeof(T) * n), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const std::vector<T>& v) { cuda_check(cudaMemcpy(p, v.data(), sizeof(T) * count, cudaMemcpyHostToDevice), "cudaMemcpy"); }
  std::vector<T> download() const {
    std::vector<T> v(count);
    cuda_check(cudaMemcpy(v.data(), p, sizeof(T) * count, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return v;
  }
};

// Runs all_reduce(sum) and all_gather on `count` elements per rank; returns the wrong elements.
long long run(aperture::Communicator& comm, std::size_t count) {
  const int me = comm.rank();
  const int n = comm.size();
  std::vector<float> mine(count);
  for (std::size_t i = 0; i < count; ++i) mine[i] = input_of(me, i);

  DeviceBuffer<float> in(count), reduced(count), gathered(count * n);
  in.upload(mine);
  comm.all_reduce(in.p, reduced.p, count, aperture::ReduceOp::sum);  // on the default stream
  comm.all_gather(in.p, gathered.p, count);
  comm.check();  // waits for the stream; throws if a kernel's wait gave up

  long long wrong = 0;
  const std::vector<float> sum = reduced.download();
  for (std::size_t i = 0; i < count; ++i) {
    float expected = 0;
    for (int r = 0; r < n; ++r) expected += input_of(r, i);
    if (sum[i] != expected && wrong++ == 0)
      std::fprintf(stderr, "rank %d: all_reduce[%zu] = %g, expected %g\n", me, i, sum[i], expected);
  }
  const std::vector<float> all = gathered.download();
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < count; ++i)
      if (all[r * count + i] != input_of(r, i) && wrong++ == 0)
        std::fprintf(stderr, "rank %d: all_gather[%d * %zu + %zu] = %g, expected %g\n", me, r, count, i,
                     all[r * count + i], input_of(r, i));
  std::printf("rank %d/%d: all_reduce + all_gather of %zu floats (%s): %s\n", me, n, count,
              comm.uses_ll(count * sizeof(float)) ? "push path" : "staged", wrong ? "WRONG" : "ok");
  return wrong;
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
  long long wrong = 0;
  {
    aperture::Communicator comm(*provider, team);  // collective: allocates its symmetric scratch
    wrong += run(comm, 1000);                        // 4 KB per rank
    wrong += run(comm, 4 << 20);                     // 16 MiB per rank
  }  // collective: the scratch is freed
  return wrong ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "example_06_collectives: %s\n", e.what());
  return 1;
}
