// src/engines/device_target_memory.cu — the message engine's target in GPU memory
// (target_memory.h): what the service thread does when a rank of another node puts, gets,
// updates or signals this rank's copy in GPU memory.
//
// Data goes through pinned host staging (MPI receives into it and sends from it; it is not
// CUDA-aware) and cudaMemcpyAsync on a stream of the engine's own, waited for before the reply,
// so a put has landed in GPU memory when its origin returns. Atomics and signals run in a
// one-thread kernel with the library's own atomics at system scope (apply_request.h): atomic
// with respect to the direct atomics of this node's GPUs, and a signal is a release store after
// every copy before it (the stream orders them; the kernel's release makes them visible first).
// The kernel needs one free SM slot: a kernel of this node that holds every SM while it waits
// for a signal from another node would keep it out until APERTURE_TIMEOUT (docs/MULTINODE.md).
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "aperture/error.h"
#include "common/cuda_check.h"
#include "common/format.h"
#include "engines/apply_request.h"
#include "engines/target_memory.h"
#include "providers/cuda/current_device.h"

namespace aperture::detail {

namespace {

// A put or get larger than this goes as several pieces; 1 MiB keeps the copy engine busy
// enough and the pinned staging small (one buffer per engine).
constexpr std::uint64_t kStagingBytes = std::uint64_t{1} << 20;

struct AtomicResult {
  std::uint64_t old_bits;
  std::uint32_t status;  // ApplyStatus
};

__global__ void apply_atomic_kernel(void* word, EngineRequest request, AtomicResult* result) {
  result->status = static_cast<std::uint32_t>(apply_atomic(word, request, &result->old_bits));
}

__global__ void apply_signal_kernel(std::uint64_t* flag, std::uint64_t value) { apply_signal(flag, value); }

class DeviceTargetMemory final : public TargetMemory {
 public:
  DeviceTargetMemory(void* base, int device) : base_(static_cast<char*>(base)), device_(device) {
    CurrentDevice on(device_, "message engine (GPU memory)");
    APERTURE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "message engine stream");
    APERTURE_CUDA_CHECK(cudaHostAlloc(&staging_, kStagingBytes, cudaHostAllocPortable), "message engine staging");
    APERTURE_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&result_), sizeof(AtomicResult),
                                      cudaHostAllocPortable | cudaHostAllocMapped),
                        "message engine atomic result");
    APERTURE_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_result_), result_, 0),
                        "message engine atomic result");
    warm_up();
  }
  ~DeviceTargetMemory() override {
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    (void)cudaSetDevice(device_);
    if (stream_ != nullptr) {
      (void)cudaStreamSynchronize(stream_);
      (void)cudaStreamDestroy(stream_);
    }
    if (staging_ != nullptr) (void)cudaFreeHost(staging_);
    if (result_ != nullptr) (void)cudaFreeHost(result_);
    (void)cudaGetLastError();
    if (previous >= 0 && previous != device_) (void)cudaSetDevice(previous);
  }

  std::string describe() const override { return detail::format("GPU memory on device {}", device_); }
  void* direct(std::uint64_t) override { return nullptr; }
  void* staging() override { return staging_; }
  std::uint64_t staging_bytes() const override { return kStagingBytes; }

  void write_from_staging(std::uint64_t offset, std::uint64_t bytes) override {
    CurrentDevice on(device_, "message engine (GPU memory)");
    APERTURE_CUDA_CHECK(cudaMemcpyAsync(base_ + offset, staging_, bytes, cudaMemcpyHostToDevice, stream_),
                        "message engine: a put into GPU memory");
    APERTURE_CUDA_CHECK(cudaStreamSynchronize(stream_), "message engine: a put into GPU memory");
  }
  void read_into_staging(std::uint64_t offset, std::uint64_t bytes) override {
    CurrentDevice on(device_, "message engine (GPU memory)");
    APERTURE_CUDA_CHECK(cudaMemcpyAsync(staging_, base_ + offset, bytes, cudaMemcpyDeviceToHost, stream_),
                        "message engine: a get from GPU memory");
    APERTURE_CUDA_CHECK(cudaStreamSynchronize(stream_), "message engine: a get from GPU memory");
  }

  std::string atomic(const EngineRequest& request, std::uint64_t* old_bits) override {
    CurrentDevice on(device_, "message engine (GPU memory)");
    result_->status = ~0u;
    apply_atomic_kernel<<<1, 1, 0, stream_>>>(base_ + request.offset, request, device_result_);
    if (auto why = APERTURE_CUDA_TRY(cudaGetLastError()); !why.empty()) return why;
    if (auto why = APERTURE_CUDA_TRY(cudaStreamSynchronize(stream_)); !why.empty()) return why;
    if (result_->status != static_cast<std::uint32_t>(ApplyStatus::ok))
      return "a bitwise atomic on a floating-point element";
    *old_bits = result_->old_bits;
    return {};
  }

  std::string signal(std::uint64_t offset, std::uint64_t value) override {
    CurrentDevice on(device_, "message engine (GPU memory)");
    apply_signal_kernel<<<1, 1, 0, stream_>>>(reinterpret_cast<std::uint64_t*>(base_ + offset), value);
    if (auto why = APERTURE_CUDA_TRY(cudaGetLastError()); !why.empty()) return why;
    return APERTURE_CUDA_TRY(cudaStreamSynchronize(stream_));
  }

  // Runs both kernels once, now. With lazy loading (CUDA's default) a kernel's module is loaded
  // at its first launch, and that waits for the kernels already running in the context: a
  // kernel of this rank that spins until another node's atomic or signal lands would never
  // let it load (seen on one H200: the first atomic timed out).
  void warm_up() {
    void* scratch = nullptr;
    APERTURE_CUDA_CHECK(cudaMallocAsync(&scratch, sizeof(std::uint64_t), stream_), "message engine warm-up");
    APERTURE_CUDA_CHECK(cudaMemsetAsync(scratch, 0, sizeof(std::uint64_t), stream_), "message engine warm-up");
    EngineRequest add;
    add.op = EngineOp::fetch_op;
    add.element_bytes = sizeof(std::uint64_t);
    add.value = 1;
    apply_atomic_kernel<<<1, 1, 0, stream_>>>(scratch, add, device_result_);
    apply_signal_kernel<<<1, 1, 0, stream_>>>(static_cast<std::uint64_t*>(scratch), 2);
    APERTURE_CUDA_CHECK(cudaGetLastError(), "message engine warm-up");
    APERTURE_CUDA_CHECK(cudaFreeAsync(scratch, stream_), "message engine warm-up");
    APERTURE_CUDA_CHECK(cudaStreamSynchronize(stream_), "message engine warm-up");
  }

  bool local_is_host(const void* local) const override {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, local) != cudaSuccess) {
      (void)cudaGetLastError();
      return true;  // not known to CUDA: ordinary host memory
    }
    return attributes.type != cudaMemoryTypeDevice;
  }
  void copy_local(void* to, const void* from, std::uint64_t bytes) const override {
    CurrentDevice on(device_, "message engine (GPU memory)");
    APERTURE_CUDA_CHECK(cudaMemcpy(to, from, bytes, cudaMemcpyDefault),
                        "message engine: a local GPU buffer through host memory");
  }

 private:
  char* base_;
  int device_;
  cudaStream_t stream_ = nullptr;
  void* staging_ = nullptr;
  AtomicResult* result_ = nullptr;         // pinned, mapped: the kernel writes it, the host reads it
  AtomicResult* device_result_ = nullptr;  // the same, as the kernel addresses it
};

}  // namespace

std::unique_ptr<TargetMemory> device_target_memory(void* base, int device) {
  return std::make_unique<DeviceTargetMemory>(base, device);
}

}  // namespace aperture::detail
