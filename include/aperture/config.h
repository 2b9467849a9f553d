// aperture/config.h — the one place that knows which compiler is building us.
//
// APERTURE_HD marks every operation that runs both in a CUDA kernel and in a CPU function.
// Under a CUDA compiler (or hipcc, APERTURE_HAS_HIP_COMPILER) it is `__host__ __device__`; under
// a plain C++ compiler it is nothing, so the device-capable headers need no GPU header on a CPU.
#pragma once

#define APERTURE_VERSION_MAJOR 0
#define APERTURE_VERSION_MINOR 1
#define APERTURE_VERSION_PATCH 0
#define APERTURE_VERSION_STRING "0.1.0"

#if defined(__CUDACC__)
#  define APERTURE_HD __host__ __device__ inline
#  define APERTURE_DEVICE __device__ inline
#  define APERTURE_HAS_CUDA_COMPILER 1
#  include <nv/target>
// Runs `device_code` when compiled for the GPU and `host_code` otherwise. Both are
// parenthesised statement lists, as NV_IF_ELSE_TARGET expects.
#  define APERTURE_IF_DEVICE_ELSE(device_code, host_code) NV_IF_ELSE_TARGET(NV_IS_DEVICE, device_code, host_code)
#  define APERTURE_DEVICE_TRAP() __trap()
#  define APERTURE_WARP_SIZE 32
#  define APERTURE_DEVICE_SYNCWARP() __syncwarp()
#  define APERTURE_DEVICE_WARP_ALL(predicate) __all_sync(0xffffffffu, predicate)
#elif defined(__HIP__)
// hipcc (clang's HIP mode) compiles every file twice, once for the host and once for the GPU;
// __HIP_DEVICE_COMPILE__ says which pass this is. HIP is checked to compile (tests/hip), not run.
#  include <hip/hip_runtime.h>
#  define APERTURE_HD __host__ __device__ inline
#  define APERTURE_DEVICE __device__ inline
#  define APERTURE_HAS_CUDA_COMPILER 0
#  define APERTURE_HAS_HIP_COMPILER 1
#  define APERTURE_DEVICE_TRAP() __builtin_trap()
// A warp is a wavefront: 64 threads on gfx90a and gfx942 (the device pass knows; 32 on RDNA).
#  if defined(__AMDGCN_WAVEFRONT_SIZE)
#    define APERTURE_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#  else
#    define APERTURE_WARP_SIZE 64
#  endif
#  define APERTURE_DEVICE_SYNCWARP() __builtin_amdgcn_wave_barrier()
#  define APERTURE_DEVICE_WARP_ALL(predicate) __all(predicate)
#  define APERTURE_DETAIL_UNPAREN(...) __VA_ARGS__
#  if defined(__HIP_DEVICE_COMPILE__)
#    define APERTURE_IF_DEVICE_ELSE(device_code, host_code) { APERTURE_DETAIL_UNPAREN device_code }
#  else
#    define APERTURE_IF_DEVICE_ELSE(device_code, host_code) { APERTURE_DETAIL_UNPAREN host_code }
#  endif
#else
#  define APERTURE_HD inline
#  define APERTURE_HAS_CUDA_COMPILER 0
#  define APERTURE_DETAIL_UNPAREN(...) __VA_ARGS__
#  define APERTURE_IF_DEVICE_ELSE(device_code, host_code) { APERTURE_DETAIL_UNPAREN host_code }
#endif
#if !defined(APERTURE_HAS_HIP_COMPILER)
#  define APERTURE_HAS_HIP_COMPILER 0
#endif
// Kernels can be compiled here: by nvcc or by hipcc.
#define APERTURE_HAS_DEVICE_COMPILER (APERTURE_HAS_CUDA_COMPILER || APERTURE_HAS_HIP_COMPILER)

// APERTURE_CHECKED turns on range, rank and direct-bit checks inside the device operations
// (host: throw aperture::Error; device: printf + trap). Off by default: the checks cost loads.
#if !defined(APERTURE_CHECKED)
#  define APERTURE_CHECKED 0
#endif
