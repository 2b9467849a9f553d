// tools/main.cpp — the `aperture` program: subcommand dispatch, --help, --version.
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string_view>

#include "commands.h"

#include "launcher/args.h"
#include "launcher/launch.h"

#include "aperture/config.h"

namespace {

const char* const kUsage =
    "usage: aperture <command> [options]\n"
    "\n"
    "Symmetric memory and one-sided RMA for GPU and CPU kernels, from any allocator.\n"
    "\n"
    "commands:\n"
    "  demo      start 4 ranks, pass data round a ring and all-reduce it, check every element\n"
    "  launch    start N ranks of a program on this machine: aperture launch -n N -- PROGRAM ...\n"
    "  info      the version, which providers run here (and why not), CPUs, the team\n"
    "  bench     aperture against memcpy, Open MPI (CPU) and the copy engine (GPU), side by side\n"
    "\n"
    "  aperture <command> --help    options of one command\n"
    "  aperture --version           the version\n"
    "\n"
    "Exit codes: 0 success; 2 bad arguments; 124 `launch --timeout` expired; 125 the launcher\n"
    "itself failed; otherwise the status of the rank that failed (128 + N for signal N).\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace aperture::cli;
  namespace launcher = aperture::launcher;
  if (argc < 2) {
    std::cerr << kUsage;
    return launcher::kExitUsage;
  }
  const std::string_view command = argv[1];
  try {
    if (command == "-h" || command == "--help" || command == "help") {
      std::cout << kUsage;
      return 0;
    }
    if (command == "--version" || command == "-V" || command == "version") {
      std::cout << "aperture " << APERTURE_VERSION_STRING << "\n";
      return 0;
    }
    if (command == "launch") return launcher::launch_main(argc - 1, argv + 1);
    if (command == "info") return info_main(argc - 1, argv + 1);
    if (command == "demo") return demo_main(argc - 1, argv + 1);
    if (command == "bench") return bench_main(argc - 1, argv + 1);
    // Internal: what mpirun starts as each rank under `aperture launch --mpi` (launcher/launch.h).
    if (launcher::is_mpi_rank_shim(argc, argv)) return launcher::mpi_rank_main(argc - 1, argv + 1);
  } catch (const std::exception& e) {
    // A subcommand reports its own errors; this is the last line of defence.
    std::cerr << "aperture " << command << ": " << e.what() << "\n";
    return 1;
  }
  std::cerr << "aperture: unknown command '" << command << "'; commands are demo, launch, info and bench "
            << "(see `aperture --help`)\n";
  return launcher::kExitUsage;
}
