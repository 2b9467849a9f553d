// src/providers/cuda/cuda_check.h — CUDA runtime errors translated into aperture::Error.
//
// Every CUDA call the library makes goes through one of two macros, so that every failure names
// the call as written, the status (name and text) and the file:line it came from:
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
#include <utility>

#include "aperture/error.h"

namespace aperture::detail {

// "cudaErrorInvalidValue (invalid argument)".
inline std::string cuda_error_text(cudaError_t status) {
  const char* name = cudaGetErrorName(status);
  const char* text = cudaGetErrorString(status);
  return std::string(name != nullptr ? name : "cudaError?") + " (" + (text != nullptr ? text : "unknown") + ")";
}

// The path from "src/" on (or the file name), so messages do not carry a build machine's tree.
inline std::string_view short_source_path(std::string_view file) {
  const auto src = file.rfind("src/");
  if (src != std::string_view::npos) return file.substr(src);
  const auto slash = file.rfind('/');
  return slash == std::string_view::npos ? file : file.substr(slash + 1);
}

// "<call> failed: <error> at <file>:<line>": how a failed runtime or driver call is described.
inline std::string call_failure_text(std::string_view call, const std::string& error, const char* file, int line) {
  std::string message(call);
  message += " failed: ";
  message += error;
  message += " at ";
  message += short_source_path(file);
  message += ":";
  message += std::to_string(line);
  return message;
}

// Throws aperture::Error("<context>: <failure>"), or just the failure when there is no context.
[[noreturn]] inline void throw_call_failure(std::string failure, std::string_view context) {
  throw Error(context.empty() ? std::move(failure) : std::string(context) + ": " + failure);
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
  if (status != cudaSuccess) throw_call_failure(cuda_failure(status, call, file, line), context);
}

}  // namespace aperture::detail

// Throws aperture::Error naming the call, the status and file:line. The optional second argument
// says what the call was for ("cuda-ipc allocate"), prefixed to the message.
#define APERTURE_CUDA_CHECK(call, ...) \
  ::aperture::detail::check_cuda((call), #call, __FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__)
// Evaluates to "" on success and to the failure's description otherwise; never throws.
#define APERTURE_CUDA_TRY(call) ::aperture::detail::cuda_failure((call), #call, __FILE__, __LINE__)
