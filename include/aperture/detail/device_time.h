// aperture/detail/device_time.h — a GPU thread's clock and back-off sleep, for the device waits.
//
// CUDA: %globaltimer (nanoseconds) and __nanosleep. HIP (compile-checked, not run): the
// constant-rate wall clock, which counts at 100 MHz on gfx90a and gfx942, and s_sleep, which
// pauses for about 64 shader clocks (some 30 ns) per unit.
#pragma once

#include <cstdint>

#include "aperture/config.h"

namespace aperture::detail {

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

}  // namespace aperture::detail
