// examples/demo/main.cpp — the demo `aperture demo` runs: each rank allocates one symmetric
// buffer and passes data round a ring, then all-reduces it, with put + signal + wait_until_ge.
//
//   build/tools/aperture demo [--provider NAME] [-n N] [--bytes B]             how a newcomer runs it
//   build/tools/aperture launch -n 4 -- build/libexec/aperture/aperture-demo   the same, by hand
//   mpirun -n 4 aperture-demo --provider mpi-window                            ranks MPI started
//
// Where to read what:
//   demo_algorithm.h     the ring and the all-reduce, written once for any Coop (aperture/coop.h)
//                        that runs one rank's side: a CPU thread (aperture::CoopHost, below) or
//                        a CUDA block (aperture::CoopBlock, demo_device.cu); every element
//                        received is checked against a value only the right sender, offset and
//                        step would produce;
//   demo.h               where each piece lies in the one symmetric allocation (DemoLayout);
//   main.cpp (this file) one rank: join the team, allocate, run both on the CPU (host memory:
//                        shm, mpi-window, openshmem) or hand over to the GPU, and rank 0's report;
//   demo_device.cu       the same on GPU memory (the CUDA providers): one CUDA block per rank.
//
// Options (`aperture demo` checks them and passes them on as below):
//   --provider NAME  a provider name or "default"
//   --bytes B        bytes per rank, a multiple of 8 (default 1 MiB)
//   -n N             the number of ranks asked for: a note when the job has another number
// Exit status: 0 when every element on every rank was right; 1 otherwise, with the first wrong
// element (rank, step, sender, value, expected value) on stderr.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "demo.h"
#include "demo_device.h"

#include "aperture/coop.h"
#include "aperture/provider.h"
#include "aperture/signal.h"
#include "aperture/team.h"

namespace aperture::demo {

namespace {

constexpr std::size_t kAlign = 64;  // each piece on its own cache lines

std::size_t round_up(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

DemoRankResult run_on_host(Team& team, const PeerView& peers, const demo::Buffers& buffers) {
  const CoopHost group;  // one CPU thread per rank; its waits throw after APERTURE_TIMEOUT
  DemoRankResult result;
  demo::prepare(group, peers, buffers);
  team.barrier();  // every rank's flags are zero before anyone signals

  // Round 1 warms up (the first touch of each page of each mapping is a page fault, which would
  // be most of what a cold round measures); round 2 is timed. Both are checked.
  demo::ring(group, peers, buffers, &result.check, 1, 0);
  demo::all_reduce(group, peers, buffers, &result.check, 1, 0);

  team.barrier();
  auto start = Clock::now();
  demo::ring(group, peers, buffers, &result.check, 2, 0);
  result.ring_seconds = seconds_since(start);

  team.barrier();
  start = Clock::now();
  demo::all_reduce(group, peers, buffers, &result.check, 2, 0);
  result.all_reduce_seconds = seconds_since(start);
  return result;
}

std::string describe_first_wrong(int rank, const demo::Check& check) {
  char text[320];
  if (check.first_phase == demo::kRing)
    std::snprintf(text, sizeof text,
                  "rank %d: ring step %d: element %llu (sent by rank %d) is %lld, expected %lld; %llu of %llu elements "
                  "checked on this rank are wrong",
                  rank, check.first_step, check.first_index, check.first_origin, check.first_got, check.first_expected,
                  check.wrong, check.checked);
  else
    std::snprintf(text, sizeof text,
                  "rank %d: all-reduce: element %llu is %lld, expected %lld (the sum over all ranks); %llu of %llu "
                  "elements checked on this rank are wrong",
                  rank, check.first_index, check.first_got, check.first_expected, check.wrong, check.checked);
  return text;
}

std::string rate(double bytes, double seconds) {
  char text[32];
  if (seconds <= 0) return "-";
  std::snprintf(text, sizeof text, "%.2f GB/s", bytes / seconds / 1e9);
  return text;
}

// "1 MiB", "12 KiB", "100 B": the largest binary unit that divides the size exactly.
std::string size_text(std::size_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB"};
  int unit = 0;
  for (; unit < 3 && bytes != 0 && bytes % 1024 == 0; ++unit) bytes /= 1024;
  return std::to_string(bytes) + " " + kUnits[unit];
}

std::string milliseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f ms", seconds * 1e3);
  return text;
}

void print_report(const Provider& provider, int world, std::size_t bytes, const std::vector<DemoRankResult>& all) {
  double ring_s = 0, ar_s = 0;
  unsigned long long checked = 0;
  const int steps = world > 1 ? world - 1 : 1;
  for (const DemoRankResult& r : all) {
    ring_s = std::max(ring_s, r.ring_seconds);  // the job is as slow as its slowest rank
    ar_s = std::max(ar_s, r.all_reduce_seconds);
    checked += r.check.checked;
  }
  const char* memory = provider.memory_kind() == MemoryKind::device ? "GPU memory" : "host memory";
  const std::string size = size_text(bytes);
  std::printf("aperture demo: %d rank%s on provider %s (%s), %s per rank\n", world, world == 1 ? "" : "s",
              std::string(provider.name()).c_str(), memory, size.c_str());
  const std::string ring_label = std::to_string(steps) + (steps == 1 ? " step" : " steps");
  std::printf("  %-10s  %-9s  %10s  %10s %-9s %s\n", "ring", ring_label.c_str(), milliseconds(ring_s).c_str(),
              rate(static_cast<double>(bytes) * steps, ring_s).c_str(), "per rank",
              ("each rank's " + size + " passed on to every other rank").c_str());
  std::printf("  %-10s  %-9s  %10s  %10s %-9s %s\n", "all-reduce", "int64 sum", milliseconds(ar_s).c_str(),
              rate(static_cast<double>(bytes), ar_s).c_str(), "algbw",
              "reduce-scatter + all-gather from put + signal");
  std::printf("  verified: every element of %llu checked, all correct (times are of the second of two rounds)\n",
              checked);
  std::fflush(stdout);
}

}  // namespace

DemoLayout::DemoLayout(std::uint64_t count, int world)
    : count_(count), world_(world), max_chunk_((count + static_cast<std::uint64_t>(world) - 1) / static_cast<std::uint64_t>(world)) {
  const std::size_t array = round_up(count * sizeof(std::int64_t));
  flags_ = 0;
  send_ = round_up((2 + 2 * static_cast<std::size_t>(world)) * sizeof(std::uint64_t));
  ring0_ = send_ + array;
  ring1_ = ring0_ + array;
  ar_in_ = ring1_ + array;
  slots_ = ar_in_ + array;
  ar_out_ = slots_ + round_up(static_cast<std::size_t>(world) * max_chunk_ * sizeof(std::int64_t));
  total_ = ar_out_ + array;
}

demo::Buffers DemoLayout::buffers(void* base) const {
  auto* bytes = static_cast<unsigned char*>(base);
  auto* flags = reinterpret_cast<std::uint64_t*>(bytes + flags_);
  demo::Buffers b;
  b.ring_data = flags;
  b.ring_free = flags + 1;
  b.rs_flags = flags + 2;
  b.ag_flags = flags + 2 + world_;
  b.flag_count = 2 + 2 * static_cast<std::uint64_t>(world_);
  b.send = reinterpret_cast<std::int64_t*>(bytes + send_);
  b.ring[0] = reinterpret_cast<std::int64_t*>(bytes + ring0_);
  b.ring[1] = reinterpret_cast<std::int64_t*>(bytes + ring1_);
  b.ar_in = reinterpret_cast<std::int64_t*>(bytes + ar_in_);
  b.slots = reinterpret_cast<std::int64_t*>(bytes + slots_);
  b.ar_out = reinterpret_cast<std::int64_t*>(bytes + ar_out_);
  b.count = count_;
  b.max_chunk = max_chunk_;
  return b;
}

int run_demo_worker(const DemoOptions& options) {
  int rank = -1;
  try {
    Team team = Team::from_env();
    rank = team.rank();
    if (options.expected_ranks != 0 && options.expected_ranks != team.size() && rank == 0)
      std::fprintf(stderr, "aperture demo: note: -n %d ignored: this job already has %d ranks\n",
                   options.expected_ranks, team.size());
    auto provider = make_provider(options.provider, team);
    const DemoLayout layout(options.bytes / sizeof(std::int64_t), team.size());
    Allocation allocation = provider->allocate(layout.total_bytes());
    const demo::Buffers buffers = layout.buffers(allocation.ptr);
    const PeerView peers = allocation.map.peer_view();
    if (!allocation.map.all_direct())
      throw Error(ErrorCode::unavailable,
                  "demo: provider " + std::string(provider->name()) + " cannot reach every rank by load/store " +
                      "from here (some peer_bases are 0); the demo needs all ranks on one machine with direct access");

    DemoRankResult mine;
    if (provider->memory_kind() == MemoryKind::device) {
      mine = run_on_device(team, peers, buffers);
    } else {
      mine = run_on_host(team, peers, buffers);
    }

    std::vector<DemoRankResult> all(static_cast<std::size_t>(team.size()));
    team.allgather(&mine, all.data(), sizeof mine);
    provider->free(allocation);

    if (mine.check.wrong != 0 || mine.check.timed_out != 0)
      std::fprintf(stderr, "aperture demo: %s\n",
                   mine.check.timed_out != 0 ? ("rank " + std::to_string(rank) + ": a kernel's wait_until_ge_for gave up after APERTURE_TIMEOUT; the " +
                                                "peer that should have signalled is stuck or failed")
                                                   .c_str()
                                             : describe_first_wrong(rank, mine.check).c_str());
    unsigned long long wrong = 0;
    int failed_ranks = 0;
    for (const DemoRankResult& r : all) {
      wrong += r.check.wrong;
      failed_ranks += (r.check.wrong != 0 || r.check.timed_out != 0) ? 1 : 0;
    }
    if (failed_ranks != 0) {
      if (rank == 0)
        std::fprintf(stderr, "aperture demo: FAILED on provider %s: %llu wrong elements on %d of %d ranks (details above)\n",
                     std::string(provider->name()).c_str(), wrong, failed_ranks, team.size());
      std::fflush(stderr);
      team.barrier();  // every rank has said its piece before the first exit makes the launcher stop the rest
      return 1;
    }
    if (rank == 0) print_report(*provider, team.size(), options.bytes, all);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aperture demo: %s%s\n", rank >= 0 ? ("rank " + std::to_string(rank) + ": ").c_str() : "",
                 e.what());
    return 1;
  }
}

}  // namespace aperture::demo

namespace {

// A whole number in [min, max], or nothing.
bool parse_number(const char* text, unsigned long long min, unsigned long long max, unsigned long long& value) {
  char* end = nullptr;
  if (text[0] < '0' || text[0] > '9') return false;
  value = std::strtoull(text, &end, 10);
  return *end == '\0' && value >= min && value <= max;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace aperture::demo;
  DemoOptions options;
  for (int i = 1; i < argc; i += 2) {
    const char* name = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    unsigned long long number = 0;
    bool ok = value != nullptr;
    if (ok && std::strcmp(name, "--provider") == 0) {
      options.provider = value;
    } else if (ok && std::strcmp(name, "--bytes") == 0) {
      ok = parse_number(value, 8, kDemoMaxBytes, number) && number % 8 == 0;
      options.bytes = number;
    } else if (ok && std::strcmp(name, "-n") == 0) {
      ok = parse_number(value, 1, 1 << 20, number);
      options.expected_ranks = static_cast<int>(number);
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "aperture demo: bad argument '%s%s%s'; usage: %s [--provider NAME] [--bytes B] [-n N] "
                   "(B a multiple of 8 up to 1 GiB); `aperture demo --help` says more\n",
                   name, value != nullptr ? " " : "", value != nullptr ? value : "", argv[0]);
      return 2;
    }
  }
  return run_demo_worker(options);
}
