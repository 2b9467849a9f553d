// aperture/detail/backoff.h — the one policy every host wait follows between two polls.
//
// A machine may run more ranks than it has cores (the CI machine: 8 ranks on 2), so a waiter
// that spins forever starves the very rank it waits for. Every host wait therefore
//   1. spins: polls again at once, `spins` times (a peer about to signal answers fastest so);
//   2. yields between polls for the first kYieldFor of the wait: the core goes to whoever can
//      use it, and this thread polls again as soon as it runs (a signal is seen within a switch);
//   3. then sleeps once every 64 polls (yielding in between), from kFirstSleep doubling to
//      kMaxSleep: a long wait gives most of its core away, yet a signal is still usually seen
//      within a yield. Before each sleep, every kWatchEvery, it calls the caller's `watch` (the
//      job watch of host_wait.h: a peer that died ends the wait at once, with an error naming it).
//   4. when the timeout has passed it calls `watch` once more before it gives up, so a wait whose
//      thread was descheduled past its whole sleep phase still names a dead peer rather than
//      reporting a bare timeout.
// The clock is read only after the spins, and then every 64 polls, so a wait that succeeds while
// spinning costs no clock read; the timeout counts from the end of the spins.
//
// The only knob is `spins`: many (the default) when every rank has a core of its own, so a
// signal is seen within nanoseconds; few when ranks share cores, where the peer is likely not
// running until this thread yields (aperture::Communicator chooses).
//
//     Backoff backoff(timeout_ns);
//     while (!ready())
//       if (!backoff.pause(watch)) return false;   // timed out
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace aperture::detail {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;

  static constexpr unsigned kSpins = 256;
  static constexpr std::chrono::microseconds kYieldFor{2000};
  static constexpr std::chrono::microseconds kFirstSleep{20};
  static constexpr std::chrono::microseconds kMaxSleep{1000};
  static constexpr std::chrono::milliseconds kWatchEvery{10};

  explicit Backoff(std::uint64_t timeout_ns, unsigned spins = kSpins) : timeout_(timeout_ns), spins_(spins) {}

  // Waits a little before the next poll. False when the timeout has passed (the caller then
  // reports it); `watch()` runs before a sleep, every kWatchEvery, and at the timeout, and may throw.
  template <class Watch>
  bool pause(Watch&& watch) {
    if (polls_ < spins_) {
      ++polls_;
      return true;
    }
    if (polls_ == spins_) start_ = next_watch_ = Clock::now();
    const unsigned long long after_spins = polls_++ - spins_;
    if (after_spins % 64 == 0) {
      const auto now = after_spins == 0 ? start_ : Clock::now();
      const auto waited = now - start_;
      if (waited >= timeout_) {
        watch();
        return false;
      }
      if (waited >= kYieldFor) {
        if (now >= next_watch_) {
          watch();
          next_watch_ = now + kWatchEvery;
        }
        std::this_thread::sleep_for(sleep_);
        if (sleep_ < kMaxSleep) sleep_ = sleep_ * 2 < kMaxSleep ? sleep_ * 2 : kMaxSleep;
        return true;
      }
    }
    std::this_thread::yield();
    return true;
  }
  bool pause() {
    return pause([] {});
  }

 private:
  std::chrono::nanoseconds timeout_;
  unsigned spins_;
  unsigned long long polls_ = 0;
  Clock::time_point start_{};
  Clock::time_point next_watch_{};
  std::chrono::microseconds sleep_ = kFirstSleep;
};

}  // namespace aperture::detail
