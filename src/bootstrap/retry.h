// src/bootstrap/retry.h — retrying a step that may fail only because the other side is not ready
// yet: a listener that is not up when a rank starts, a mailbox whose backlog is full.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace aperture::detail {

// How one try of a retried step ended.
enum class Try {
  done,     // it worked
  again,    // not yet: try again after a pause
  give_up,  // it cannot work: stop now
};

// Runs `step` until it says done or give_up, or until `deadline` has passed after a try that said
// again; between tries it sleeps `first_pause`, doubling up to `longest_pause`, so a peer that is
// nearly ready costs little and one that is slow costs few wake-ups. True when a try was done.
template <class Step>
bool retry_until(std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds first_pause,
                 std::chrono::milliseconds longest_pause, Step step) {
  for (auto pause = first_pause;; pause = std::min(pause * 2, longest_pause)) {
    const Try result = step();
    if (result != Try::again) return result == Try::done;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace aperture::detail
