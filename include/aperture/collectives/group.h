// aperture/collectives/group.h — who runs one rank's side of a collective together.
//
// Every collective is written once, as an APERTURE_HD template over a Group, and runs as
//   - HostGroup:  one CPU thread (host memory: shm, mpi-window, openshmem);
//   - BlockGroup: one CUDA block; a grid of blocks splits the data, block b of every rank
//                 working with block b of every other rank (GPU memory);
//   - WarpGroup:  one warp, for fine-grained point-to-point moves inside a kernel.
//
// A Group provides
//     thread(), threads()   this thread's index in the group and the group's size
//     part(), parts()       which of the groups of this rank that share the work this one is
//                           (blockIdx.x / gridDim.x for blocks; 0 / 1 on a CPU thread)
//     sync()                every thread of the group reaches this point and sees the others' writes
//     all(ok)               sync() that also ANDs one condition over the group's threads
//     fence()               called by a thread about to signal, after sync(): makes the group's
//                           earlier writes visible system-wide first
//     wait(flag, value, timeout_ns)   this thread waits (acquire) until *flag >= value; false when
//                           it gave up. On the host a timeout throws aperture::Error instead.
//
// Which threads take part is always "all threads of the group": every collective and every bulk
// operation must be reached by all of them (they contain sync()).
#pragma once

#include <cstdint>

#include "aperture/config.h"
#include "aperture/signal.h"
#include "aperture/detail/host_wait.h"

#include <chrono>
#include <thread>

namespace aperture::collectives {

// One CPU thread is the whole group. Its waits spin briefly, then yield, then sleep: a machine
// may run more ranks than it has cores, and a spinning waiter would starve the rank it waits for.
// `spins`: loads before the first yield. Many (the default) when every rank has a core of its
// own, so a signal is seen within nanoseconds; few when ranks share cores, where the peer being
// waited for is likely not running until this one yields (aperture::Communicator chooses).
struct HostGroup {
  unsigned spins = 256;

  std::uint64_t thread() const { return 0; }
  std::uint64_t threads() const { return 1; }
  int part() const { return 0; }
  int parts() const { return 1; }
  void sync() const {}
  bool all(bool ok) const { return ok; }
  void fence() const {}  // signal() is a release store: it orders this thread's writes already
  // timeout_ns is the handle's (APERTURE_TIMEOUT when the Communicator was made); on expiry it
  // throws aperture::Error like every host wait.
  bool wait(const std::uint64_t* flag, std::uint64_t value, std::uint64_t timeout_ns) const;
};

// Yielding keeps the latency of a signal low while another rank can use the core (it runs as
// soon as we yield); sleeping starts only after a millisecond of yields. While it sleeps it asks
// the job watch (aperture/detail/host_wait.h) every 10 ms, so a peer that died mid-collective
// ends the wait at once with an error naming it, not at the timeout.
inline bool HostGroup::wait(const std::uint64_t* flag, std::uint64_t value, std::uint64_t timeout_ns) const {
  using clock = std::chrono::steady_clock;
  std::uint64_t seen = 0;
  for (unsigned spin = 0; spin < spins; ++spin)
    if ((seen = aperture::detail::load_acquire(flag)) >= value) return true;
  const auto start = clock::now();
  const auto timeout = std::chrono::nanoseconds(timeout_ns != 0 ? timeout_ns : aperture::detail::host_timeout_ns());
  auto sleep = std::chrono::microseconds(20);
  auto next_watch = start + std::chrono::milliseconds(2);
  for (unsigned attempt = 0;; ++attempt) {
    if ((seen = aperture::detail::load_acquire(flag)) >= value) return true;
    if ((attempt & 63) == 0) {
      const auto now = clock::now();
      const auto waited = now - start;
      if (waited >= timeout) aperture::detail::throw_wait_timeout(flag, value, seen);
      if (waited >= std::chrono::milliseconds(2)) {
        if (now >= next_watch) {
          aperture::detail::check_job_alive(flag, value);
          next_watch = now + std::chrono::milliseconds(10);
        }
        std::this_thread::sleep_for(sleep);
        if (sleep < std::chrono::milliseconds(1)) sleep *= 2;
        continue;
      }
    }
    std::this_thread::yield();
  }
}

#if APERTURE_HAS_CUDA_COMPILER
// One CUDA block. Thread 0 .. world-1 signal and wait (one peer each), so a barrier costs one
// round trip, not world of them.
struct BlockGroup {
  __device__ std::uint64_t thread() const { return threadIdx.x; }
  __device__ std::uint64_t threads() const { return blockDim.x; }
  __device__ int part() const { return static_cast<int>(blockIdx.x); }
  __device__ int parts() const { return static_cast<int>(gridDim.x); }
  __device__ void sync() const { __syncthreads(); }
  __device__ bool all(bool ok) const { return __syncthreads_and(ok ? 1 : 0) != 0; }
  // The other threads' stores reached this one through __syncthreads; the system fence makes
  // them visible to other GPUs before this thread's signal (fences are cumulative).
  __device__ void fence() const { __threadfence_system(); }
  // A barrier's peer usually arrives within a few microseconds: poll without sleeping first (the
  // backoff of wait_until_ge_for would add up to a microsecond to every barrier), then wait
  // bounded as usual.
  __device__ bool wait(const std::uint64_t* flag, std::uint64_t value, std::uint64_t timeout_ns) const {
    for (int spin = 0; spin < kBarrierSpins; ++spin)
      if (aperture::detail::load_acquire(flag) >= value) return true;
    return aperture::wait_until_ge_for(flag, value, timeout_ns, nullptr);
  }
  static constexpr int kBarrierSpins = 4096;
};

// Every thread of the grid as one group, for bulk moves only (group_copy / group_put / group_get):
// neighbouring threads of the whole grid take neighbouring 16-byte vectors, so every block's
// traffic spreads over the whole buffer. On 2x H200 over NVLink a 256 MiB put ran at 369 GB/s
// this way and at 348 GB/s with one contiguous slice per block (docs/PERFORMANCE.md). A grid
// cannot synchronise without a cooperative launch, so this group has no sync(), wait() or
// barrier: end the kernel (or use a BlockGroup) before signalling that the data is there.
struct GridGroup {
  __device__ std::uint64_t thread() const {
    return static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  }
  __device__ std::uint64_t threads() const { return static_cast<std::uint64_t>(gridDim.x) * blockDim.x; }
};

// One warp of a block; every warp of the grid is its own group (part = global warp index).
struct WarpGroup {
  __device__ std::uint64_t thread() const { return threadIdx.x % 32u; }
  __device__ std::uint64_t threads() const { return 32; }
  __device__ int part() const { return static_cast<int>((blockIdx.x * blockDim.x + threadIdx.x) / 32u); }
  __device__ int parts() const { return static_cast<int>(gridDim.x * blockDim.x / 32u); }
  __device__ void sync() const { __syncwarp(); }
  __device__ bool all(bool ok) const {
    __syncwarp();
    return __all_sync(0xffffffffu, ok ? 1 : 0) != 0;
  }
  __device__ void fence() const { __threadfence_system(); }
  __device__ bool wait(const std::uint64_t* flag, std::uint64_t value, std::uint64_t timeout_ns) const {
    return aperture::wait_until_ge_for(flag, value, timeout_ns, nullptr);
  }
};
#endif

}  // namespace aperture::collectives
