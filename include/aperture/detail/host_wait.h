// aperture/detail/host_wait.h — how the host waits on a flag without burning a core forever.
//
// Spin for a few microseconds (a peer that is about to signal answers fastest this way), then
// yield, then sleep with a growing interval capped at 1 ms: the CI machine runs 8 ranks on 2
// cores, and a spinning waiter would starve the rank it waits for. While it sleeps it also asks
// the job watch (below) whether the job has failed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "aperture/error.h"
#include "aperture/export.h"

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

// The job watch: a wait on a flag knows nothing of ranks, but the Team does. A Team connected to
// a rendezvous hub installs a function here that returns why the job failed (a rank died, calls
// did not match), or "" while all is well, without blocking. Host waits ask it every few
// milliseconds while they sleep, so a wait for a signal that a dead rank will never send ends at
// once, naming the rank, instead of at APERTURE_TIMEOUT. One per process (an inline variable:
// the library and the program share it).
using JobWatch = std::string (*)();
APERTURE_API inline std::atomic<JobWatch> job_watch{nullptr};

// Throws aperture::Error when the job watch reports a failure; for hand-written wait loops.
inline void check_job_alive(const std::uint64_t* flag, std::uint64_t value) {
  const JobWatch watch = job_watch.load(std::memory_order_acquire);
  if (watch == nullptr) return;
  const std::string failure = watch();
  if (failure.empty()) return;
  char text[128];
  std::snprintf(text, sizeof text, "wait_until_ge(flag=%p, value=%llu) abandoned: ", static_cast<const void*>(flag),
                static_cast<unsigned long long>(value));
  throw Error(std::string(text) + failure);
}

template <class Load>
bool host_wait_until_ge_for(const std::uint64_t* flag, std::uint64_t value, std::uint64_t timeout_ns,
                            std::uint64_t* seen, Load load) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto sleep = std::chrono::microseconds(1);
  auto next_watch = start;  // when to ask the job watch next
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
      if (const auto now = clock::now(); now >= next_watch) {
        check_job_alive(flag, value);
        next_watch = now + std::chrono::milliseconds(10);
      }
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
