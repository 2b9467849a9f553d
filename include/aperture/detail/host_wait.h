// aperture/detail/host_wait.h — how the host waits on a flag without burning a core forever.
//
// Spin for a few microseconds (a peer that is about to signal answers fastest this way), then
// yield, then sleep with a growing interval capped at 1 ms: the CI machine runs 8 ranks on 2
// cores, and a spinning waiter would starve the rank it waits for.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "aperture/error.h"

namespace aperture::detail {

// APERTURE_TIMEOUT in seconds (fractions allowed), default 60; the same for every blocking call.
inline double timeout_seconds() {
  const char* text = std::getenv("APERTURE_TIMEOUT");
  if (text == nullptr || *text == '\0') return 60.0;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0) || seconds > 1e7)
    throw Error("APERTURE_TIMEOUT='" + std::string(text) +
                "' is not a positive number of seconds; set it to e.g. 60 or unset it for the default");
  return seconds;
}

inline std::uint64_t host_timeout_ns() { return static_cast<std::uint64_t>(timeout_seconds() * 1e9); }

template <class Load>
bool host_wait_until_ge_for(const std::uint64_t* flag, std::uint64_t value, std::uint64_t timeout_ns,
                            std::uint64_t* seen, Load load) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto sleep = std::chrono::microseconds(1);
  for (unsigned attempt = 0;; ++attempt) {
    const std::uint64_t v = load(flag);
    if (v >= value) {
      if (seen) *seen = v;
      return true;
    }
    if (attempt < 1024) continue;  // brief spin
    const auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - start).count();
    if (static_cast<std::uint64_t>(waited) >= timeout_ns) {
      if (seen) *seen = v;
      return false;
    }
    if (attempt < 1024 + 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(sleep);
      if (sleep < std::chrono::milliseconds(1)) sleep *= 2;
    }
  }
}

[[noreturn]] inline void throw_wait_timeout(const std::uint64_t* flag, std::uint64_t value, std::uint64_t seen) {
  char text[160];
  std::snprintf(text, sizeof text, "wait_until_ge(flag=%p, value=%llu) timed out after %g s; the flag still holds %llu. ",
                static_cast<const void*>(flag), static_cast<unsigned long long>(value), timeout_seconds(),
                static_cast<unsigned long long>(seen));
  throw Error(std::string(text) +
              "Did the peer that should signal this flag fail or skip its signal()? Raise APERTURE_TIMEOUT if it is "
              "only slow.");
}

}  // namespace aperture::detail
