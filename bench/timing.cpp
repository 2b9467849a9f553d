// bench/timing.cpp — the timing loop every side of `aperture bench` shares (bench.h's
// time_calls and time_interleaved): a warm-up, an iteration count from an estimate, then trials
// of back-to-back calls after a team barrier, each trial's figure the slowest rank's mean; the
// median trial is reported. Several calls (aperture and its baselines) take their trials in
// turn, so that what the machine does meanwhile weighs on each alike.
#include <algorithm>
#include <chrono>

#include "bench.h"

#include "aperture/team.h"

namespace aperture::bench {

std::vector<Timed> time_interleaved(Team& team, const BenchOptions& options,
                                    const std::vector<std::function<void()>>& calls, const std::function<void()>& finish) {
  const auto slowest = [&](double mine) {
    std::vector<double> all(static_cast<std::size_t>(team.size()));
    team.allgather(&mine, all.data(), sizeof mine);
    return *std::max_element(all.begin(), all.end());
  };
  const auto run = [&](const std::function<void()>& call, int n) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) call();
    if (finish) finish();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / n;
  };
  const std::size_t n = calls.size();
  std::vector<int> iters(n);
  const auto prepare = [&](std::size_t c) {  // warm-up (first touches, first launches), then the count
    run(calls[c], 2);
    team.barrier();
    const double estimate = slowest(run(calls[c], 3));
    iters[c] = static_cast<int>(std::clamp(options.trial_seconds / std::max(estimate, 1e-9), 1.0,
                                           static_cast<double>(options.max_iters)));
  };
  const auto trial = [&](std::size_t c) {
    team.barrier();
    return slowest(run(calls[c], iters[c]));
  };
  std::vector<std::vector<double>> trials(n);
  if (options.interleave) {
    for (std::size_t c = 0; c < n; ++c) prepare(c);
    for (int t = 0; t < options.trials; ++t)
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t c = t % 2 == 0 ? k : n - 1 - k;  // A B C, then C B A: no call always goes first
        trials[c].push_back(trial(c));
      }
  } else {
    for (std::size_t c = 0; c < n; ++c) {
      prepare(c);
      for (int t = 0; t < options.trials; ++t) trials[c].push_back(trial(c));
    }
  }
  std::vector<Timed> timed(n);
  for (std::size_t c = 0; c < n; ++c) {
    std::sort(trials[c].begin(), trials[c].end());
    timed[c] = Timed{trials[c][trials[c].size() / 2] * 1e6, iters[c]};
  }
  return timed;
}

Timed time_calls(Team& team, const BenchOptions& options, const std::function<void()>& call,
                 const std::function<void()>& finish) {
  return time_interleaved(team, options, {call}, finish).front();
}

}  // namespace aperture::bench
