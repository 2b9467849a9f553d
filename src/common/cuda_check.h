// src/common/cuda_check.h — CUDA runtime errors translated into aperture::Error.
//
// Every CUDA runtime call of the library, the tools and the tests goes through one of two macros,
// so that every failure names the call as written, the status (name and text) and the file:line
// it came from:
//
//     APERTURE_CUDA_CHECK(cudaMalloc(&p, bytes), "cuda-ipc heap");   // throws aperture::Error
//     std::string why = APERTURE_CUDA_TRY(cudaIpcOpenMemHandle(...));  // "" on success
//
// The second form is for steps whose failure every rank must first agree on (a rank that threw
// alone would leave its peers waiting in the next collective call).
//
// A failed runtime call also leaves its status behind as the thread's "last error"; both forms
// clear it, so a caller's later cudaGetLastError() does not report our failure as theirs.
// Sticky errors (a kernel that trapped) cannot be cleared and keep being reported by the runtime.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "aperture/error.h"
#include "common/call_failure.h"

namespace aperture::detail {

// "cudaErrorInvalidValue (invalid argument)".
inline std::string cuda_error_text(cudaError_t status) {
  const char* name = cudaGetErrorName(status);
  const char* text = cudaGetErrorString(status);
  return std::string(name != nullptr ? name : "cudaError?") + " (" + (text != nullptr ? text : "unknown") + ")";
}

// What a caller can do about `status`: a full device is out_of_memory, a missing device or
// driver unavailable, anything else a failed system call.
inline ErrorCode cuda_error_code(cudaError_t status) {
  switch (status) {
    case cudaErrorMemoryAllocation: return ErrorCode::out_of_memory;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNotSupported: return ErrorCode::unavailable;
    default: return ErrorCode::system;
  }
}

// "" when `status` is cudaSuccess; otherwise "<call> failed: <name> (<text>) at <file>:<line>".
inline std::string cuda_failure(cudaError_t status, std::string_view call, const char* file, int line) {
  if (status == cudaSuccess) return {};
  (void)cudaGetLastError();  // clear the non-sticky last error this call left behind
  return call_failure_text(call, cuda_error_text(status), file, line);
}

// Throws aperture::Error("<context>: <call> failed: ...") when `status` is not cudaSuccess.
inline void check_cuda(cudaError_t status, std::string_view call, const char* file, int line,
                       std::string_view context = {}) {
  if (status != cudaSuccess)
    throw_call_failure(cuda_error_code(status), call, cuda_failure(status, call, file, line), context);
}

}  // namespace aperture::detail

// Throws aperture::Error naming the call, the status and file:line. The optional second argument
// says what the call was for ("cuda-ipc allocate"), prefixed to the message; it is evaluated only
// when the call failed, so a context built from strings costs nothing on a hot path (a launch).
#define APERTURE_CUDA_CHECK(call, ...)                                                       \
  do {                                                                                       \
    if (const cudaError_t aperture_cuda_status_ = (call); aperture_cuda_status_ != cudaSuccess) \
      ::aperture::detail::check_cuda(aperture_cuda_status_, #call, __FILE__,                 \
                                     __LINE__ __VA_OPT__(, ) __VA_ARGS__);                   \
  } while (0)
// Evaluates to "" on success and to the failure's description otherwise; never throws.
#define APERTURE_CUDA_TRY(call) ::aperture::detail::cuda_failure((call), #call, __FILE__, __LINE__)
