// aperture/detail/host_wait.h — how the host waits on a flag without burning a core forever.
//
// Every host wait pauses between polls as detail/backoff.h says (spin, yield, sleep) and, while
// it sleeps, asks the job watch (below) whether the job has failed; it gives up after
// APERTURE_TIMEOUT with the error of throw_wait_timeout.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "aperture/detail/backoff.h"
#include "aperture/detail/env_timeout.h"  // timeout_seconds(): APERTURE_TIMEOUT
#include "aperture/error.h"
#include "aperture/export.h"

namespace aperture::detail {

inline std::uint64_t host_timeout_ns() { return static_cast<std::uint64_t>(timeout_seconds() * 1e9); }

// The job watch: a wait on a flag knows nothing of ranks, but the Team does. A Team connected to
// a rendezvous hub installs a function here that returns why the job failed (a rank died, calls
// did not match), or "" while all is well, without blocking. Host waits ask it every few
// milliseconds while they sleep, so a wait for a signal that a dead rank will never send ends at
// once, naming the rank, instead of at APERTURE_TIMEOUT. One per process (an inline variable:
// the library and the program share it).
using JobWatch = std::string (*)();
APERTURE_API inline std::atomic<JobWatch> job_watch{nullptr};

// Why the job failed, as the job watch says, or "" while all is well or no watch is installed.
// Never blocks.
inline std::string reported_job_failure() {
  const JobWatch watch = job_watch.load(std::memory_order_acquire);
  return watch == nullptr ? std::string() : watch();
}

// Throws aperture::Error (peer_lost) when the job watch reports a failure; for hand-written wait
// loops.
inline void check_job_alive(const std::uint64_t* flag, std::uint64_t value) {
  const std::string failure = reported_job_failure();
  if (failure.empty()) return;
  char text[128];
  std::snprintf(text, sizeof text, "wait_until_ge(flag=%p, value=%llu) abandoned: ", static_cast<const void*>(flag),
                static_cast<unsigned long long>(value));
  throw Error(ErrorCode::peer_lost, std::string(text) + failure);
}

// Polls load(flag) until it is >= value, pausing between polls as Backoff (backoff.h) says and
// asking the job watch while it sleeps. False, and the last value in *seen, after timeout_ns.
template <class Load>
bool host_wait_until_ge_for(const std::uint64_t* flag, std::uint64_t value, std::uint64_t timeout_ns,
                            std::uint64_t* seen, Load load, unsigned spins = Backoff::kSpins) {
  Backoff backoff(timeout_ns, spins);
  for (;;) {
    const std::uint64_t v = load(flag);
    if (v >= value || !backoff.pause([&] { check_job_alive(flag, value); })) {
      if (seen) *seen = v;
      return v >= value;
    }
  }
}

[[noreturn]] inline void throw_wait_timeout(const std::uint64_t* flag, std::uint64_t value, std::uint64_t seen) {
  char text[160];
  std::snprintf(text, sizeof text, "wait_until_ge(flag=%p, value=%llu) timed out after %g s; the flag still holds %llu. ",
                static_cast<const void*>(flag), static_cast<unsigned long long>(value), timeout_seconds(),
                static_cast<unsigned long long>(seen));
  throw Error(
      ErrorCode::timeout,
      std::string(text) +
          "Did the peer that should signal this flag fail or skip its signal()? Raise APERTURE_TIMEOUT if it is "
          "only slow.");
}

}  // namespace aperture::detail
