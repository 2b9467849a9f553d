// The host side of the GPU kernels' cancel word (src/collectives/kernel_cancel.h): the thread that
// raises it once the job watch reports a failure, on a plain word (no GPU needed).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "aperture/detail/host_wait.h"
#include "collectives/kernel_cancel.h"

namespace {

using aperture::collectives::detail::KernelCancel;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::uint64_t load(const std::uint64_t& word) {
  return std::atomic_ref<const std::uint64_t>(word).load(std::memory_order_acquire);
}

// Polls until the word is raised, for at most `bound`; how long it took.
Clock::duration until_raised(const std::uint64_t& word, Clock::duration bound) {
  const auto start = Clock::now();
  while (load(word) == 0 && Clock::now() - start < bound) std::this_thread::sleep_for(100us);
  return Clock::now() - start;
}

TEST(KernelCancel, StaysDownWhileTheJobIsWell) {
  std::uint64_t word = 0;
  std::atomic<int> asked{0};
  {
    KernelCancel cancel(&word, [&] { ++asked; return std::string(); }, 1ms);
    std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(cancel.raised());
    EXPECT_EQ(cancel.reason(), "");
  }
  EXPECT_EQ(word, 0u);
  EXPECT_GE(asked.load(), 5) << "the watch did not keep asking the job watch";
}

TEST(KernelCancel, RaisesTheWordOnceTheJobFailsAndKeepsTheReason) {
  std::uint64_t word = 0;
  std::atomic<int> asked{0};
  const std::string failure = "rank 1: the job failed: rank 3 (pid 4242) was killed by signal 9";
  KernelCancel cancel(&word, [&] { return ++asked >= 4 ? failure : std::string(); }, 2ms);
  const auto took = until_raised(word, 5s);
  ASSERT_EQ(load(word), 1u) << "not raised within 5 s";
  EXPECT_LT(took, 2s);
  EXPECT_TRUE(cancel.raised());
  EXPECT_EQ(cancel.reason(), failure);
  // Raised once, the watch stops asking.
  const int after = asked.load();
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(asked.load(), after);
}

TEST(KernelCancel, AHandRaisedFailureComesFirstAndStays) {
  std::uint64_t word = 0;
  std::atomic<bool> job_failed{false};
  KernelCancel cancel(&word, [&] { return job_failed ? std::string("rank 0: the job failed: rank 2 lost") : std::string(); },
                      1ms);
  cancel.raise("ncclAllGather (all_reduce between nodes) among ranks 0, 2 failed: remote process exited");
  EXPECT_EQ(load(word), 1u);
  job_failed = true;
  cancel.raise("a second failure");
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(cancel.reason(), "ncclAllGather (all_reduce between nodes) among ranks 0, 2 failed: remote process exited");
}

TEST(KernelCancel, StopsAtOnceWhenDestroyed) {
  std::uint64_t word = 0;
  const auto start = Clock::now();
  { KernelCancel cancel(&word, [] { return std::string(); }, std::chrono::hours(1)); }
  EXPECT_LT(Clock::now() - start, 1s) << "the destructor waited for the next poll";
  EXPECT_EQ(word, 0u);
}

// What src/collectives/hierarchical.cpp gives it: the process's job watch (the Team's hub client
// installs one; here a stand-in that reports a lost rank from its third question on).
std::atomic<int> g_questions{0};
std::string failing_watch() {
  return ++g_questions >= 3 ? std::string("rank 0: the job failed: rank 5 lost its connection to the hub") : std::string();
}

TEST(KernelCancel, FollowsTheProcesssJobWatch) {
  namespace d = aperture::detail;
  const d::JobWatch before = d::job_watch.exchange(&failing_watch);
  std::uint64_t word = 0;
  {
    KernelCancel cancel(&word, [] { return d::reported_job_failure(); });  // the default period
    const auto took = until_raised(word, 5s);
    ASSERT_EQ(load(word), 1u);
    EXPECT_LT(took, 1s) << "several periods of " << KernelCancel::kEvery.count() << " ms expected";
    EXPECT_EQ(cancel.reason(), "rank 0: the job failed: rank 5 lost its connection to the hub");
  }
  d::job_watch.store(before);
}

}  // namespace
