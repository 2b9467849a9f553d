// src/engines/idle_loop.h — the loop both MPI engines' threads run (the RMA engine's progress
// thread, the message engine's service thread): poll MPI until told to stop, and rest between
// polls that found nothing.
//
// Resting is yielding while work came recently (more usually follows) and otherwise sleeping
// 20 us. Linux rounds a thread's sleeps up by its timer slack, 50 us by default, which made that
// 100 us per poll (measured on a loaded 2-core machine), so the thread sets its own slack to 1 us.
#pragma once

#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include <atomic>
#include <chrono>
#include <thread>

namespace aperture::detail {

// Runs on the calling thread until `stop` is set. `poll()` returns true when it found work; for
// `busy_window` after that (and after the start) the loop only yields between polls.
template <class Poll>
void run_idle_loop(const std::atomic<bool>& stop, std::chrono::microseconds busy_window, Poll poll) {
#if defined(__linux__)
  prctl(PR_SET_TIMERSLACK, 1000UL);  // ns; a failure only leaves the default slack
#endif
  auto last_work = std::chrono::steady_clock::now();
  while (!stop.load(std::memory_order_relaxed)) {
    if (poll()) {
      last_work = std::chrono::steady_clock::now();
      continue;
    }
    if (std::chrono::steady_clock::now() - last_work < busy_window)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace aperture::detail
