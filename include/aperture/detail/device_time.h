// aperture/detail/device_time.h — a GPU thread's clock and back-off sleep, and DeviceBackoff, the
// one policy every device wait follows between two polls (signal.h, proxy_queue.h), with the
// cancel word that ends such a wait early (device_cancelled).
//
// CUDA: %globaltimer (nanoseconds) and __nanosleep. HIP (compile-checked, not run): the
// constant-rate wall clock, which counts at 100 MHz on gfx90a and gfx942, and s_sleep, which
// pauses for about 64 shader clocks (some 30 ns) per unit.
#pragma once

#include <cstdint>

#include "aperture/config.h"

namespace aperture::detail {

// Device waits poll this many times before they start sleeping between polls.
inline constexpr unsigned kDeviceSpinPolls = 256;

#if APERTURE_HAS_CUDA_COMPILER
__device__ __forceinline__ std::uint64_t device_time_ns() {
  std::uint64_t now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}
__device__ __forceinline__ void device_sleep_ns(unsigned ns) { __nanosleep(ns); }
#elif APERTURE_HAS_HIP_COMPILER && defined(__HIP_DEVICE_COMPILE__)  // HIP's device functions: GPU pass only
__device__ inline std::uint64_t device_time_ns() { return static_cast<std::uint64_t>(wall_clock64()) * 10; }
__device__ inline void device_sleep_ns(unsigned ns) {
  for (unsigned slept = 0; slept < ns; slept += 32) __builtin_amdgcn_s_sleep(1);  // s_sleep takes a constant
}
#endif

#if APERTURE_HAS_CUDA_COMPILER || (APERTURE_HAS_HIP_COMPILER && defined(__HIP_DEVICE_COMPILE__))
// Whether the host has raised `cancel` (non-zero: give up now); never, where it is null. The word
// lives where the host can store into it while a kernel runs (pinned, mapped host memory), and
// orders nothing: a volatile load sees the host's store without caching it. On CUDA the test and
// the load are one predicated load in inline PTX, with no branch the optimiser sees: the kernels
// around it then compile nearly as they did without it (docs/MULTINODE.md, "A lost rank and the
// node's kernels", says what still differs).
#if APERTURE_HAS_CUDA_COMPILER
__device__ __forceinline__ bool device_cancelled(const std::uint64_t* cancel) {
  std::uint64_t raised = 0;
  asm volatile(
      "{\n\t.reg .pred given;\n\tsetp.ne.u64 given, %1, 0;\n\tmov.u64 %0, 0;\n\t@given ld.volatile.u64 %0, [%1];\n\t}"
      : "=l"(raised)
      : "l"(cancel));
  return raised != 0;
}
#else
__device__ inline bool device_cancelled(const std::uint64_t* cancel) {
  return cancel != nullptr && *static_cast<const volatile std::uint64_t*>(cancel) != 0;
}
#endif

// Between two polls of a device wait. A signal usually lands within a microsecond: poll flat out
// first, then back off so a long wait does not keep the memory system busy, sleeping from 32 ns
// doubling to 1 us. The clock is read only from then on (the timeout counts from the first
// backoff): a wait that succeeds in its first polls costs no clock read. The cancel word (null:
// none) is read there too, beside the clock, so the polls before cost nothing more for it.
//
//   DeviceBackoff backoff(timeout_ns, cancel);
//   while (!ready())
//     if (!backoff.pause()) return timed_out;   // or cancelled
class DeviceBackoff {
 public:
  __device__ explicit DeviceBackoff(std::uint64_t timeout_ns, const std::uint64_t* cancel = nullptr)
      : timeout_ns_(timeout_ns), cancel_(cancel) {}

  // Pauses before the next poll; false once timeout_ns have passed since the first sleep, or
  // once the host raised the cancel word.
  __device__ bool pause() {
    if (polls_ < kDeviceSpinPolls) {
      ++polls_;
      return true;
    }
    const std::uint64_t now = device_time_ns();
    if (start_ == 0) start_ = now;
    // (The null test first: where no word is given, e.g. proxy_queue.h's waits, it folds away.)
    if (now - start_ >= timeout_ns_ || (cancel_ != nullptr && device_cancelled(cancel_))) return false;
    device_sleep_ns(sleep_ns_);
    if (sleep_ns_ < kMaxSleepNs) sleep_ns_ *= 2;
    return true;
  }

 private:
  static constexpr unsigned kFirstSleepNs = 32;
  static constexpr unsigned kMaxSleepNs = 1024;
  std::uint64_t timeout_ns_;
  const std::uint64_t* cancel_;
  std::uint64_t start_ = 0;
  unsigned polls_ = 0;
  unsigned sleep_ns_ = kFirstSleepNs;
};
#endif

}  // namespace aperture::detail
