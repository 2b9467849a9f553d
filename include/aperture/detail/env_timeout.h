// aperture/detail/env_timeout.h — APERTURE_TIMEOUT, the one variable the header-only host waits
// read themselves.
//
// The library's table of variables (src/common/env.h) lists it with the others and reads it
// through these same functions, so a program that only includes the headers and one that links
// the library agree on its default, its range and its error.
#pragma once

#include <cstdlib>
#include <string>

#include "aperture/error.h"

namespace aperture::detail {

inline constexpr const char* kTimeoutVariable = "APERTURE_TIMEOUT";
inline constexpr double kDefaultTimeoutSeconds = 60.0;
inline constexpr double kMaxTimeoutSeconds = 1e7;

// `text` (the variable's value, or null when unset) as seconds; throws aperture::Error
// (invalid_argument) naming the variable, its value and the fix when it is not in (0, 1e7].
inline double parse_timeout_seconds(const char* text) {
  if (text == nullptr || *text == '\0') return kDefaultTimeoutSeconds;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0) || seconds > kMaxTimeoutSeconds)
    throw Error(ErrorCode::invalid_argument,
                std::string(kTimeoutVariable) + "='" + text +
                    "' is not a positive number of seconds; set it to e.g. 60 or unset it for the default");
  return seconds;
}

// APERTURE_TIMEOUT in seconds (fractions allowed), default 60; the same for every blocking call.
inline double timeout_seconds() { return parse_timeout_seconds(std::getenv(kTimeoutVariable)); }

}  // namespace aperture::detail
