// tests/bench/timing_test.cpp — the order in which `aperture bench` times its sides
// (bench/timing.cpp): each call's warm-up and count first, then one trial of each in turn with
// the order reversed every other trial (or, with --sequential, each call's trials in a row), and
// a figure per call from its own trials.
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "bench.h"

#include "aperture/team.h"

namespace aperture::bench {
namespace {

// One call per letter, each appending its letter to `log`; max_iters 1 makes every trial one call.
struct Calls {
  std::string log;
  std::vector<std::function<void()>> of(const std::string& letters) {
    std::vector<std::function<void()>> calls;
    for (char c : letters) calls.push_back([this, c] { log += c; });
    return calls;
  }
};

BenchOptions one_call_trials(int trials, bool interleave) {
  BenchOptions o;
  o.trials = trials;
  o.max_iters = 1;
  o.interleave = interleave;
  return o;
}

TEST(BenchTiming, TrialsAlternateAndTheOrderTurnsEveryOtherTrial) {
  Team team = Team::single();
  Calls calls;
  const std::vector<Timed> timed = time_interleaved(team, one_call_trials(4, true), calls.of("ABC"));
  // Warm-up (2 calls) and estimate (3) of each, then trials A B C, C B A, A B C, C B A.
  EXPECT_EQ(calls.log, "AAAAABBBBBCCCCC" "ABC" "CBA" "ABC" "CBA");
  ASSERT_EQ(timed.size(), 3u);
  for (const Timed& t : timed) EXPECT_EQ(t.iters, 1);
}

TEST(BenchTiming, SequentialRunsEachCallsTrialsInARow) {
  Team team = Team::single();
  Calls calls;
  time_interleaved(team, one_call_trials(3, false), calls.of("AB"));
  EXPECT_EQ(calls.log, "AAAAA" "AAA" "BBBBB" "BBB");
}

TEST(BenchTiming, EachCallGetsItsOwnFigureAndIterationCount) {
  // A call of about 2 ms against one of about nothing: the figures are each call's own, and the
  // fast one runs as many calls per trial as fill the trial (up to max_iters).
  Team team = Team::single();
  BenchOptions o;
  o.trials = 3;
  o.trial_seconds = 0.01;
  o.max_iters = 50;
  const auto slow = [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
  const auto fast = [] {};
  const std::vector<Timed> timed = time_interleaved(team, o, {slow, fast});
  EXPECT_GE(timed[0].us, 2000.0);
  EXPECT_LT(timed[1].us, 1000.0);
  EXPECT_LE(timed[0].iters, 5);  // 10 ms of 2 ms calls
  EXPECT_EQ(timed[1].iters, 50);
}

TEST(BenchTiming, FinishEndsEveryRunOfEveryCall) {
  Team team = Team::single();
  Calls calls;
  int finished = 0;
  time_interleaved(team, one_call_trials(2, true), calls.of("AB"), [&] { ++finished; });
  EXPECT_EQ(finished, 2 * 2 + 2 * 2);  // warm-up and estimate of each, then two trials of each
}

TEST(BenchTiming, TimeCallsIsOneCallAlone) {
  Team team = Team::single();
  Calls calls;
  const Timed t = time_calls(team, one_call_trials(3, true), calls.of("A").front());
  EXPECT_EQ(calls.log, "AAAAAAAA");
  EXPECT_EQ(t.iters, 1);
}

}  // namespace
}  // namespace aperture::bench
