// src/common/nccl_check.h — NCCL errors translated into aperture::Error.
//
//     APERTURE_NCCL_CHECK(ncclCommInitRank(&comm, n, id, rank), comm, "nccl start");  // throws
//     std::string why = APERTURE_NCCL_TRY(ncclMemAlloc(&ptr, bytes), nullptr);      // "" on success
//
// The text is "<call> failed: <ncclGetErrorString> (<ncclGetLastError>)": NCCL's last error
// (of `comm`, or of the thread when it is null) says far more than the status does.
#pragma once

#include <nccl.h>

#include <string>
#include <string_view>

#include "aperture/error.h"
#include "common/call_failure.h"

namespace aperture::detail {

// "unhandled system error (<what NCCL last logged>)".
inline std::string nccl_error_text(ncclResult_t status, ncclComm_t comm = nullptr) {
  std::string text = ncclGetErrorString(status);
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0') {
    text += " (";
    text += last;
    text += ")";
  }
  return text;
}

// A remote peer's failure is peer_lost, a misuse of NCCL's API invalid_argument, anything else
// a failed system call.
inline ErrorCode nccl_error_code(ncclResult_t status) {
  switch (status) {
    case ncclRemoteError: return ErrorCode::peer_lost;
    case ncclInvalidArgument:
    case ncclInvalidUsage: return ErrorCode::invalid_argument;
    default: return ErrorCode::system;
  }
}

// "" when `status` is ncclSuccess; otherwise "<call> failed: <text> (<last error>)".
inline std::string nccl_failure(ncclResult_t status, std::string_view call, ncclComm_t comm = nullptr) {
  if (status == ncclSuccess) return {};
  return call_failure_text(call, nccl_error_text(status, comm));
}

inline void check_nccl(ncclResult_t status, std::string_view call, ncclComm_t comm, std::string_view context = {}) {
  if (status != ncclSuccess)
    throw_call_failure(nccl_error_code(status), call, nccl_failure(status, call, comm), context);
}

}  // namespace aperture::detail

// Throws aperture::Error naming the call and NCCL's account of it; `comm` (or nullptr) is the
// communicator whose last error to quote, the optional third argument a context prefix.
#define APERTURE_NCCL_CHECK(call, comm, ...) \
  ::aperture::detail::check_nccl((call), #call, (comm)__VA_OPT__(, ) __VA_ARGS__)
// Evaluates to "" on success and to the failure's description otherwise; never throws.
#define APERTURE_NCCL_TRY(call, comm) ::aperture::detail::nccl_failure((call), #call, (comm))
