// aperture/coop.h — who runs an operation together: the cooperating-threads vocabulary.
//
// Every group-cooperative operation (aperture/coop_rma.h) and every collective
// (aperture/collectives/) takes a Coop as its first argument and is called by ALL threads of
// that Coop with the same arguments; each thread does a share. The same template runs on a CPU
// thread (CoopHost) and on a GPU (the others), as the NCCL device API's Coop types and CUDA's
// cooperative groups do:
//
//   CoopHost     one CPU thread (host memory: shm, mpi-window, openshmem)
//   CoopThread   one GPU thread
//   CoopWarp     one warp (32 lanes) of a block
//   CoopBlock    one CUDA block (a CTA)
//   CoopGrid     every thread of the grid: bulk moves only. A grid cannot synchronise without a
//                cooperative launch, so it has no sync(), all(), fence() or wait(): end the
//                kernel (or move to a CoopBlock) before signalling that the data is there.
//
// Every Coop has
//   thread_rank()           this thread's index in the group, 0 .. size() - 1
//   size(), num_threads()   the number of threads in the group
// and every Coop but CoopGrid
//   sync()                  every thread of the group reaches this point and sees the others' writes
//   all(ok)                 sync() that also ANDs `ok` over the group's threads
//   fence()                 called by one thread about to signal, after sync(): makes the group's
//                           earlier writes visible system-wide first (fences are cumulative)
//   wait(flag, value, timeout_ns[, cancel])   THIS thread waits (acquire, system scope) until
//                           *flag >= value; false when it gave up after timeout_ns, or (on a GPU)
//                           once the host raised the cancel word `cancel` (null, the default:
//                           none; signal.h's wait_until_ge_for). A CoopHost throws aperture::Error
//                           instead (timeout_ns 0: APERTURE_TIMEOUT), like every host wait, pauses
//                           between polls as detail/backoff.h says, and asks the job watch rather
//                           than a cancel word.
//   meta_group_rank(), meta_group_size()   which of the groups that share this rank's work this
//                           one is: the block in the grid, the warp (or thread) in the grid; 0 of 1
//                           on a CPU thread. (Cooperative groups count a tile within its block;
//                           here the count is over the grid, as the collectives split work.)
//
// All are trivially copyable: pass them by value. Device-only constructs are compiled only under a
// device compiler (APERTURE_HAS_DEVICE_COMPILER: CUDA or HIP); a host build sees CoopHost alone.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "aperture/config.h"
#include "aperture/signal.h"
#include "aperture/detail/backoff.h"
#include "aperture/detail/host_wait.h"

namespace aperture {

// One CPU thread is the whole group. `spins`: the polls of a wait before it starts yielding
// (detail/backoff.h); aperture::Communicator gives few where ranks share cores. Its members are
// APERTURE_HD so that templates instantiated with it compile under nvcc too; in device code it
// would act as one GPU thread (CoopThread says that better).
struct CoopHost {
  unsigned spins = detail::Backoff::kSpins;

  APERTURE_HD std::uint32_t thread_rank() const { return 0; }
  APERTURE_HD std::uint32_t size() const { return 1; }
  APERTURE_HD std::uint32_t num_threads() const { return 1; }
  APERTURE_HD std::uint32_t meta_group_rank() const { return 0; }
  APERTURE_HD std::uint32_t meta_group_size() const { return 1; }
  APERTURE_HD void sync() const {}
  APERTURE_HD bool all(bool ok) const { return ok; }
  // One thread: its own program order already puts its writes before its release signal; the
  // fence keeps a relaxed store after it ordered too (free on x86).
  APERTURE_HD void fence() const {
    APERTURE_IF_DEVICE_ELSE((__threadfence_system();), (std::atomic_thread_fence(std::memory_order_release);))
  }
  APERTURE_HD bool wait(const std::uint64_t* flag, std::uint64_t value, std::uint64_t timeout_ns,
                        const std::uint64_t* cancel = nullptr) const {
    APERTURE_IF_DEVICE_ELSE(
        (return wait_until_ge_for(flag, value, timeout_ns, nullptr, cancel);),
        ((void)cancel; std::uint64_t seen = 0;
         if (!detail::host_wait_until_ge_for(
                 flag, value, timeout_ns != 0 ? timeout_ns : detail::host_timeout_ns(), &seen,
                 [](const std::uint64_t* f) { return detail::load_acquire(f); }, spins))
             detail::throw_wait_timeout(flag, value, seen);
         return true;))
  }
};

#if APERTURE_HAS_DEVICE_COMPILER
namespace detail {
inline constexpr std::uint32_t kWarpSize = APERTURE_WARP_SIZE;
// Grid-wide counts in 64 bits: gridDim.x alone may be 2^31 - 1.
__device__ inline std::uint64_t grid_thread_rank() {
  return static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::uint64_t grid_threads() { return static_cast<std::uint64_t>(gridDim.x) * blockDim.x; }
}  // namespace detail

struct CoopThread {
  __device__ std::uint32_t thread_rank() const { return 0; }
  __device__ std::uint32_t size() const { return 1; }
  __device__ std::uint32_t num_threads() const { return 1; }
  __device__ std::uint64_t meta_group_rank() const { return detail::grid_thread_rank(); }
  __device__ std::uint64_t meta_group_size() const { return detail::grid_threads(); }
  __device__ void sync() const {}
  __device__ bool all(bool ok) const { return ok; }
  __device__ void fence() const { __threadfence_system(); }
  __device__ bool wait(const std::uint64_t* flag, std::uint64_t value, std::uint64_t timeout_ns,
                       const std::uint64_t* cancel = nullptr) const {
    return wait_until_ge_for(flag, value, timeout_ns, nullptr, cancel);
  }
};

// A whole warp of a block whose size is a multiple of the warp size (every lane takes part).
struct CoopWarp {
  __device__ std::uint32_t thread_rank() const { return threadIdx.x % detail::kWarpSize; }
  __device__ std::uint32_t size() const { return detail::kWarpSize; }
  __device__ std::uint32_t num_threads() const { return detail::kWarpSize; }
  __device__ std::uint64_t meta_group_rank() const { return detail::grid_thread_rank() / detail::kWarpSize; }
  __device__ std::uint64_t meta_group_size() const { return detail::grid_threads() / detail::kWarpSize; }
  __device__ void sync() const { APERTURE_DEVICE_SYNCWARP(); }
  __device__ bool all(bool ok) const {
    APERTURE_DEVICE_SYNCWARP();
    return APERTURE_DEVICE_WARP_ALL(ok ? 1 : 0) != 0;
  }
  __device__ void fence() const { __threadfence_system(); }
  __device__ bool wait(const std::uint64_t* flag, std::uint64_t value, std::uint64_t timeout_ns,
                       const std::uint64_t* cancel = nullptr) const {
    return wait_until_ge_for(flag, value, timeout_ns, nullptr, cancel);
  }
};

// One CUDA block (CTA); a grid of blocks is meta_group_size() such groups.
struct CoopBlock {
  __device__ std::uint32_t thread_rank() const { return threadIdx.x; }
  __device__ std::uint32_t size() const { return blockDim.x; }
  __device__ std::uint32_t num_threads() const { return blockDim.x; }
  __device__ std::uint32_t meta_group_rank() const { return blockIdx.x; }
  __device__ std::uint32_t meta_group_size() const { return gridDim.x; }
  __device__ void sync() const { __syncthreads(); }
  __device__ bool all(bool ok) const { return __syncthreads_and(ok ? 1 : 0) != 0; }
  // The other threads' stores reached this one through __syncthreads; the system fence makes
  // them visible to other GPUs before this thread's signal (fences are cumulative).
  __device__ void fence() const { __threadfence_system(); }
  __device__ bool wait(const std::uint64_t* flag, std::uint64_t value, std::uint64_t timeout_ns,
                       const std::uint64_t* cancel = nullptr) const {
    return wait_until_ge_for(flag, value, timeout_ns, nullptr, cancel);
  }
};

// Every thread of the grid; bulk moves only (see above). Neighbouring threads of the whole grid
// take neighbouring 16-byte vectors, so every block's traffic spreads over the whole buffer
// (why that is faster over NVLink: bench/results/2026-11-30-h200-x2/NOTES.md, "Point to point").
struct CoopGrid {
  __device__ std::uint64_t thread_rank() const { return detail::grid_thread_rank(); }
  __device__ std::uint64_t size() const { return detail::grid_threads(); }
  __device__ std::uint64_t num_threads() const { return detail::grid_threads(); }
};
#endif

// is_coop_v<C>: C is one of the Coop types (what the group-cooperative overloads accept).
// can_sync_v<C>: C has sync(), all(), fence() and wait() (every Coop but CoopGrid).
template <class C>
struct is_coop : std::false_type {};
template <class C>
struct can_sync : std::false_type {};
template <>
struct is_coop<CoopHost> : std::true_type {};
template <>
struct can_sync<CoopHost> : std::true_type {};
#if APERTURE_HAS_DEVICE_COMPILER
template <>
struct is_coop<CoopThread> : std::true_type {};
template <>
struct is_coop<CoopWarp> : std::true_type {};
template <>
struct is_coop<CoopBlock> : std::true_type {};
template <>
struct is_coop<CoopGrid> : std::true_type {};
template <>
struct can_sync<CoopThread> : std::true_type {};
template <>
struct can_sync<CoopWarp> : std::true_type {};
template <>
struct can_sync<CoopBlock> : std::true_type {};
#endif
template <class C>
inline constexpr bool is_coop_v = is_coop<std::remove_cv_t<C>>::value;
template <class C>
inline constexpr bool can_sync_v = can_sync<std::remove_cv_t<C>>::value;

static_assert(std::is_trivially_copyable_v<CoopHost>, "a Coop is passed by value");

}  // namespace aperture
