// bench/standalone/barrier_waits.cpp — how a host rank should wait in a barrier when ranks share
// cores: a model of the collectives' epoch barrier (every rank stores its epoch into each peer's
// flag line, then waits for every peer's) with a 64-byte one-shot reduction around it, in N
// forked processes on shared memory, under one of three ways of waiting after a few polls:
//
//   yield       sched_yield between polls (what detail/backoff.h does)
//   futex K     K yields, then sleep on a futex that a signalling peer wakes (it looks at a
//               "sleeping" word after its stores, so a peer that sleeps is never missed)
//   core CAP    yield only while a peer not yet arrived last ran on this CPU (it cannot run
//               until this rank steps aside); otherwise poll on, up to CAP polls, then yield
//
// Prints the slowest rank's mean time per call. The measurements and what was decided are in
// bench/results/2026-12-02-cpu-2core/NOTES.md ("CPU all-reduce at 4 ranks: other ways of waiting"). Run alone, e.g.
//
//     c++ -O2 -std=c++20 bench/standalone/barrier_waits.cpp -o barrier_waits
//     for run in 1 2 3; do ./barrier_waits 4 yield; ./barrier_waits 4 futex 2; ./barrier_waits 4 core 500; done
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace {

constexpr int kMaxRanks = 8;
constexpr int kSpins = 16;  // polls before any policy acts: tuning::kHostSharedCoreSpins
constexpr int kElements = 16;

struct alignas(64) Line {
  std::atomic<std::uint64_t> value{0};
};

// What one rank owns; peers write its flags and read its staging.
struct Rank {
  Line flag[kMaxRanks];                      // flag[s]: the last epoch rank s announced here
  alignas(64) std::atomic<std::uint32_t> doorbell{0};  // the futex word
  alignas(64) std::atomic<std::uint32_t> sleeping{0};
  alignas(64) std::atomic<int> cpu{-1};      // where this rank last arrived
  alignas(64) float staging[2][kElements];
};

enum class Policy { yield, futex, core };

long futex(std::atomic<std::uint32_t>* word, int op, std::uint32_t value) {
  return syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), op, value, nullptr, nullptr, 0);
}

struct Job {
  Rank* ranks;
  int world;
  Policy policy;
  int knob;  // futex: yields before sleeping; core: polls while every missing peer runs elsewhere

  bool arrived(int me, int peer, std::uint64_t epoch) const {
    return ranks[me].flag[peer].value.load(std::memory_order_acquire) >= epoch;
  }
  bool a_missing_peer_shares_my_cpu(int me, std::uint64_t epoch) const {
    const int mine = sched_getcpu();
    for (int peer = 0; peer < world; ++peer)
      if (peer != me && !arrived(me, peer, epoch) && ranks[peer].cpu.load(std::memory_order_relaxed) == mine) return true;
    return false;
  }

  void wait_for(int me, int peer, std::uint64_t epoch) const {
    for (int polls = 0; !arrived(me, peer, epoch); ++polls) {
      if (polls < kSpins) continue;
      if (policy == Policy::core && polls < kSpins + knob && !a_missing_peer_shares_my_cpu(me, epoch)) continue;
      if (policy != Policy::futex || polls < kSpins + knob) {
        sched_yield();
        continue;
      }
      const std::uint32_t ring = ranks[me].doorbell.load();
      ranks[me].sleeping.store(1, std::memory_order_seq_cst);
      if (!arrived(me, peer, epoch)) futex(&ranks[me].doorbell, FUTEX_WAIT, ring);
      ranks[me].sleeping.store(0, std::memory_order_relaxed);
    }
  }

  // One all-reduce of kElements floats: stage, barrier, sum every rank's staging.
  float call(int me, std::uint64_t epoch, int i) const {
    float* mine = ranks[me].staging[epoch & 1];
    for (int j = 0; j < kElements; ++j) mine[j] = static_cast<float>(me * 100 + j + i);
    if (policy == Policy::core) ranks[me].cpu.store(sched_getcpu(), std::memory_order_relaxed);
    for (int peer = 0; peer < world; ++peer)
      if (peer != me) ranks[peer].flag[me].value.store(epoch, std::memory_order_release);
    if (policy == Policy::futex) {
      std::atomic_thread_fence(std::memory_order_seq_cst);  // the stores above before the reads of `sleeping`
      for (int peer = 0; peer < world; ++peer)
        if (peer != me && ranks[peer].sleeping.load(std::memory_order_relaxed) != 0) {
          ranks[peer].doorbell.fetch_add(1);
          futex(&ranks[peer].doorbell, FUTEX_WAKE, 1);
        }
    }
    for (int peer = 0; peer < world; ++peer)
      if (peer != me) wait_for(me, peer, epoch);
    float sum = 0;
    for (int peer = 0; peer < world; ++peer) sum += ranks[peer].staging[epoch & 1][me % kElements];
    return sum;
  }
};

}  // namespace

// A non-negative decimal number, or the usage error.
int number(const char* text, const char* what) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || value < 0 || value > 1'000'000'000) {
    std::fprintf(stderr, "barrier_waits: %s must be a number, not '%s'\n", what, text);
    std::exit(2);
  }
  return static_cast<int>(value);
}

int main(int argc, char** argv) {
  const std::string name = argc > 2 ? argv[2] : "";
  const Policy policy = name == "futex" ? Policy::futex : name == "core" ? Policy::core : Policy::yield;
  const int fixed = policy == Policy::yield ? 3 : 4;  // arguments before CALLS
  if (argc < fixed || argc > fixed + 1 || (policy == Policy::yield && name != "yield")) {
    std::fprintf(stderr, "usage: %s RANKS yield|futex K|core CAP [CALLS]\n", argv[0]);
    return 2;
  }
  const int world = number(argv[1], "RANKS");
  const int knob = policy == Policy::yield ? 0 : number(argv[3], name == "futex" ? "K" : "CAP");
  const int calls = argc > fixed ? number(argv[fixed], "CALLS") : 20000;
  if (world < 2 || world > kMaxRanks || calls < 1) {
    std::fprintf(stderr, "barrier_waits: RANKS must be 2..%d and CALLS positive\n", kMaxRanks);
    return 2;
  }
  void* shared = mmap(nullptr, sizeof(Rank) * kMaxRanks + sizeof(double) * kMaxRanks, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return 1;
  Rank* ranks = new (shared) Rank[kMaxRanks];
  auto* us_per_call = reinterpret_cast<double*>(ranks + kMaxRanks);
  const Job job{ranks, world, policy, knob};
  for (int me = 0; me < world; ++me) {
    if (fork() != 0) continue;
    std::uint64_t epoch = 0;
    float checksum = 0;
    for (int i = 0; i < 2000; ++i) checksum += job.call(me, ++epoch, i);  // warm up
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) checksum += job.call(me, ++epoch, i);
    us_per_call[me] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / calls;
    _exit(checksum == 0.5f ? 3 : 0);  // keeps the sums
  }
  for (int i = 0; i < world; ++i) wait(nullptr);
  std::printf("%d ranks, %s %d: %.2f us per call (slowest rank)\n", world, name.c_str(), knob,
              *std::max_element(us_per_call, us_per_call + world));
  return 0;
}
