// src/bootstrap/wire_status.h — the status of a failed Team call on the wire: its ErrorCode.
//
// Apart from wire.h, which stand-alone programs (the security test's stranger) include without
// the library's public headers.
#pragma once

#include <cstdint>

#include "aperture/error.h"

namespace aperture::detail::wire {

// A failure's status on the wire is its aperture::ErrorCode (never 0), so every rank throws the
// code the hub judged: a rank that timed out, died or disagreed reads the same on all of them.
inline std::int32_t status_of(ErrorCode code) { return static_cast<std::int32_t>(code); }
inline ErrorCode code_of_status(std::int32_t status) {
  return status >= static_cast<std::int32_t>(ErrorCode::invalid_argument) &&
                 status <= static_cast<std::int32_t>(ErrorCode::internal)
             ? static_cast<ErrorCode>(status)
             : ErrorCode::internal;
}

}  // namespace aperture::detail::wire
