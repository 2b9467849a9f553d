// tools/demo.cpp — `aperture demo`: its arguments, and starting the ranks of the demo program
// (examples/demo, aperture-demo) through the launcher component.
//
// A process that already is a rank (started by `aperture launch`, mpirun or torchrun) becomes the
// demo program directly, as that job's rank, so `aperture launch -n 8 -- aperture demo` and
// `mpirun -n 4 aperture demo --provider mpi-window` work too.
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "programs.h"

#include "launcher/args.h"
#include "launcher/launch.h"

#include "aperture/provider.h"

namespace aperture::cli {

using launcher::kExitUsage;
using launcher::parse_bytes;
using launcher::parse_integer;
using launcher::take_option_value;
using launcher::UsageError;

const char* const kDemoUsage =
    "usage: aperture demo [--provider NAME] [-n N] [--bytes B]\n"
    "\n"
    "Starts N ranks on this machine (default 4). Each allocates a symmetric buffer from the\n"
    "provider and\n"
    "  (a) passes its data round a ring of all ranks with put + signal / wait_until_ge,\n"
    "  (b) runs an int64 sum all-reduce (reduce-scatter + all-gather) built from the same calls,\n"
    "checking every element it receives against values that differ per rank and per element.\n"
    "Rank 0 prints the provider, the times and how many elements were checked; any wrong element\n"
    "or error makes the demo exit non-zero with the rank and values.\n"
    "\n"
    "  --provider NAME  default (the default), shm, mpi-window, openshmem, cuda-ipc, cuda-vmm,\n"
    "                   nvshmem, nccl; `aperture info` says which run here\n"
    "  -n, --ranks N    number of ranks, 1 to 1024 (default 4)\n"
    "  --bytes B        bytes per rank, a multiple of 8, e.g. 4096, 64K, 16M (default 1M, at most 1G);\n"
    "                   each rank allocates about 6 x B of symmetric memory\n"
    "\n"
    "Both run twice on the same memory; the times shown are of the second round (the first one\n"
    "pays for page faults and first launches). Under `aperture launch`, mpirun or torchrun the demo\n"
    "runs as one rank of that job instead of starting its own. With a GPU provider the same code\n"
    "runs as one CUDA block per rank.\n"
    "mpi-window and openshmem need ranks MPI started: the demo starts them through mpirun.\n";

namespace {

struct DemoOptions {
  std::string provider = "default";
  int ranks = 4;
  bool ranks_given = false;
  std::size_t bytes = std::size_t{1} << 20;  // per rank
  bool worker = false;                       // this process is one rank (internal)
};

constexpr std::size_t kDemoMaxBytes = std::size_t{1} << 30;

bool needs_mpirun(const std::string& provider) { return provider == "mpi-window" || provider == "openshmem"; }


DemoOptions parse_demo_args(int argc, char** argv) {
  DemoOptions options;
  std::string value;
  for (int i = 1; i < argc;) {
    const std::string_view arg = argv[i];
    if (take_option_value(argc, argv, i, "", "--provider", value, "shm")) {
      options.provider = value;
    } else if (take_option_value(argc, argv, i, "-n", "--ranks", value)) {
      options.ranks = static_cast<int>(parse_integer("-n", value, 1, launcher::kMaxRanks));
      options.ranks_given = true;
    } else if (take_option_value(argc, argv, i, "", "--bytes", value, "1M")) {
      options.bytes = parse_bytes("--bytes", value);
      if (options.bytes == 0 || options.bytes % 8 != 0 || options.bytes > kDemoMaxBytes) {
        const std::size_t near = std::clamp<std::size_t>(options.bytes / 8 * 8, 8, kDemoMaxBytes);
        throw UsageError("--bytes " + value + ": the demo moves int64 elements, so give a multiple of 8 from 8 to 1G" +
                         " (e.g. " + (near == kDemoMaxBytes ? std::string("1G") : std::to_string(near)) + ")");
      }
    } else if (arg == "--worker") {
      options.worker = true;
      ++i;
    } else {
      throw UsageError("unknown argument '" + std::string(arg) + "'; see `aperture demo --help`");
    }
  }
  return options;
}

// Refuses, before any rank starts, a provider that does not exist or cannot run here.
void check_provider(const std::string& name) {
  if (name == "default") return;
  std::string known = "default";
  for (const ProviderStatus& status : provider_statuses()) {
    known += ", " + status.name;
    if (status.name != name) continue;
    if (!status.compiled_in || (!status.available && !needs_mpirun(name)))
      throw UsageError("provider '" + name + "' cannot run here: " + status.reason +
                       "; `aperture info` lists the providers that can");
    return;
  }
  throw UsageError("unknown provider '" + name + "'; known providers: " + known);
}

}  // namespace

int demo_main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::cout << kDemoUsage;
      return 0;
    }
  }
  DemoOptions options;
  launcher::LaunchOptions job;
  try {
    options = parse_demo_args(argc, argv);
    job.program = "aperture-demo";
    job.program_path = find_program(job.program);
    job.args = {"--provider", options.provider, "--bytes", std::to_string(options.bytes)};
    if (options.worker || launcher::started_as_a_rank()) {
      // One rank of a job someone else started: the demo notes a -n that differs from the job's.
      if (options.ranks_given) job.args.insert(job.args.end(), {"-n", std::to_string(options.ranks)});
      return exec_program(job.program_path, job.program, job.args);
    }
    check_provider(options.provider);
    job.ranks = options.ranks;
    job.use_mpi = needs_mpirun(options.provider);
    job.prefix_stdout = false;  // rank 0's report reads better bare; errors keep "[rank R] "
  } catch (const UsageError& e) {
    std::cerr << "aperture demo: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "aperture demo: " << e.what() << "\n";
    return 1;
  }
  return launcher::launch(job);
}

}  // namespace aperture::cli
