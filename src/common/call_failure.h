// src/common/call_failure.h — how a failed library or system call is described and thrown.
//
// The CUDA, driver, NCCL and MPI check helpers (cuda_check.h, nccl_check.h, mpi_check.h and
// providers/cuda/cu_check.h) differ only in how they turn a status into text; the shape of the
// message and of the aperture::Error is decided here, once:
//
//     "<context>: <call as written> failed: <status text> at <file>:<line>"
//
// with Error::call() the function's name alone ("cudaMalloc") and a code from the status.
// Shared by src, the tools and the tests.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "aperture/error.h"

namespace aperture::detail {

// The path from "src/" on (or the file name), so messages do not carry a build machine's tree.
inline std::string_view short_source_path(std::string_view file) {
  for (std::string_view top : {"src/", "tools/", "bench/", "tests/", "examples/"}) {
    const auto at = file.rfind(top);
    if (at != std::string_view::npos && (at == 0 || file[at - 1] == '/')) return file.substr(at);
  }
  const auto slash = file.rfind('/');
  return slash == std::string_view::npos ? file : file.substr(slash + 1);
}

// The function a call expression names: "cudaMalloc(&p, n)" -> "cudaMalloc", "cu.cuMemMap(...)"
// -> "cuMemMap", "MPI_Bcast of the length" -> "MPI_Bcast".
inline std::string_view called_function(std::string_view call) {
  call = call.substr(0, call.find_first_of("( "));
  if (const auto dot = call.rfind('.'); dot != std::string_view::npos) call.remove_prefix(dot + 1);
  while (!call.empty() && call.back() == ' ') call.remove_suffix(1);
  return call;
}

// "<call> failed: <error>", with " at <file>:<line>" when a file is given.
inline std::string call_failure_text(std::string_view call, std::string_view error, const char* file = nullptr,
                                     int line = 0) {
  std::string message(call);
  message += " failed: ";
  message += error;
  if (file != nullptr) {
    message += " at ";
    message += short_source_path(file);
    message += ":";
    message += std::to_string(line);
  }
  return message;
}

// Throws aperture::Error(code, "<context>: <failure>") (just the failure without a context),
// naming the function `call` calls.
[[noreturn]] inline void throw_call_failure(ErrorCode code, std::string_view call, std::string failure,
                                            std::string_view context = {}) {
  throw Error(code, context.empty() ? std::move(failure) : std::string(context) + ": " + failure,
              called_function(call));
}

}  // namespace aperture::detail
