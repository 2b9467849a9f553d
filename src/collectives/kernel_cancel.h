// src/collectives/kernel_cancel.h — the cancel word of a team across nodes' GPU kernels
// (CollectiveHandle::cancel), and who raises it.
//
// The node's phases of a team across nodes are aperture's kernels, whose waits learn of nothing
// but their own timeout. When a node is lost, a survivor's node peer may throw (its exchange
// between nodes heard of the lost rank) while this rank's kernel still waits for that peer's
// signal, which will never come. So a thread asks the job watch (detail::reported_job_failure)
// every kEvery; once the job has failed it raises the word, and the kernels' waits give up at
// their next backoff poll (signal.h). The failure of this rank's own NCCL exchange raises it too
// (raise()). Raised once, the word stays: after a failure every later kernel gives up at once,
// and the host throws the recorded reason (Hierarchy::check) rather than a timeout.
//
// Header-only, on a word the caller owns (pinned, mapped host memory on a GPU; any word in a
// test), so that the unit tests can run it without a GPU.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace aperture::collectives::detail {

class KernelCancel {
 public:
  // Why the job failed, or "" while all is well; must not block (detail::reported_job_failure).
  using Source = std::function<std::string()>;
  // As often as host waits ask the job watch (detail/backoff.h's kWatchEvery).
  static constexpr std::chrono::milliseconds kEvery{10};

  KernelCancel(std::uint64_t* word, Source source, std::chrono::milliseconds every = kEvery)
      : word_(word), source_(std::move(source)), every_(every) {
    watch_ = std::thread([this] { watch(); });
  }
  ~KernelCancel() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    watch_.join();
  }
  KernelCancel(const KernelCancel&) = delete;
  KernelCancel& operator=(const KernelCancel&) = delete;

  // Records `why` (the first reason stays) and raises the word. Any thread.
  void raise(const std::string& why) {
    std::lock_guard lock(mutex_);
    if (raised_.load(std::memory_order_relaxed)) return;
    reason_ = why;
    raised_.store(true, std::memory_order_release);
    // The kernels read it with a volatile load (detail/device_time.h's device_cancelled).
    std::atomic_ref<std::uint64_t>(*word_).store(1, std::memory_order_release);
    wake_.notify_all();
  }
  bool raised() const { return raised_.load(std::memory_order_acquire); }
  // What raised the word; "" while it is not raised.
  std::string reason() const {
    std::lock_guard lock(mutex_);
    return reason_;
  }

 private:
  void watch() {
    std::unique_lock lock(mutex_);
    while (!stopping_ && !raised_.load(std::memory_order_relaxed)) {
      if (wake_.wait_for(lock, every_, [&] { return stopping_ || raised_.load(std::memory_order_relaxed); })) break;
      lock.unlock();
      const std::string failure = source_();  // outside the lock: raise() may run meanwhile
      if (!failure.empty()) raise(failure);
      lock.lock();
    }
  }

  std::uint64_t* word_;
  Source source_;
  std::chrono::milliseconds every_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::atomic<bool> raised_{false};
  std::string reason_;
  std::thread watch_;  // last: started once everything above is made
};

}  // namespace aperture::collectives::detail
