// src/launcher/launch.cpp — `aperture launch`: its arguments, and which way the ranks are started.
#include "launcher/launch.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "launch_modes.h"
#include "launcher/args.h"
#include "launcher/program_path.h"

#include "bootstrap/launched_by.h"  // who started this process
#include "common/env.h"

namespace aperture::launcher {

const char* const kLaunchUsage =
    "usage: aperture launch -n N [--nodes K] [--timeout S] [--mpi [--hostfile F]] [--iris] -- PROGRAM [ARGS...]\n"
    "\n"
    "Starts N ranks of PROGRAM on this machine, each with what aperture::Team::from_env() needs,\n"
    "and prints their output line by line as \"[rank R] ...\" (stderr lines on stderr).\n"
    "\n"
    "  -n, --ranks N    number of ranks, 1 to 1024 (more ranks than CPUs is allowed)\n"
    "  --timeout S      wall-clock limit for the whole job in seconds; on expiry the ranks\n"
    "                   still running are named and stopped, and the exit code is 124\n"
    "  --mpi            start the ranks through Open MPI's mpirun (needed by the mpi-window and\n"
    "                   openshmem providers, whose memory only MPI-started ranks can have);\n"
    "                   mpirun then stops the job when a rank fails, and its message names it.\n"
    "                   Inside a Slurm allocation of several nodes (sbatch, salloc) mpirun places\n"
    "                   the ranks on its nodes by itself, and they meet over TCP too\n"
    "  --nodes K        spread the ranks over K nodes in rank blocks; ranks on different nodes\n"
    "                   share no memory and meet over TCP. Without --mpi: the hub listens on\n"
    "                   APERTURE_HUB_HOST (default 127.0.0.1) and each rank's command is put\n"
    "                   behind APERTURE_NODE_EXEC ({node}: its node), as scripts/simnodes.sh run\n"
    "                   sets them; unset, the nodes are a split of this machine. Each node's\n"
    "                   ranks get NCCL_HOSTID=aperture-node-<node> (unless set; not with\n"
    "                   --hostfile), so NCCL too treats the nodes as separate hosts; where the\n"
    "                   machine has a GPU per rank, each node sees its own (CUDA_VISIBLE_DEVICES:\n"
    "                   the GPUs of its ranks' block, of the list the launcher was given if set)\n"
    "  --iris           run a Python program written for Iris unmodified: `python prog.py` runs as\n"
    "                   `python -m aperture.iris prog.py`, so `import iris` is aperture.iris (refused\n"
    "                   where a real Iris is importable, unless APERTURE_IRIS_OVERRIDE=1)\n"
    "  --hostfile F     with --mpi: mpirun starts the ranks on F's hosts, N/K per node (Open MPI\n"
    "                   reaches them through its rsh agent, OMPI_MCA_plm_rsh_agent)\n"
    "\n"
    "As soon as one rank exits non-zero or is killed, the others get SIGTERM and, 2 s later,\n"
    "SIGKILL (with --mpi, mpirun gets 5 s to stop them itself), and the launcher exits with that\n"
    "rank's status (128 + N for signal N). SIGINT/SIGTERM/SIGHUP to the launcher are passed on to\n"
    "the ranks the same way. No rank, and nothing a rank started, outlives the launcher: the ranks\n"
    "run in one process group that a watchdog kills if the launcher itself is killed.\n"
    "Exit codes: 0 all ranks succeeded; 124 --timeout expired; 2 bad arguments; 125 the launcher\n"
    "itself failed; otherwise the failing rank's status.\n"
    "\n"
    "Environment: APERTURE_TIMEOUT (seconds, default 60) bounds every collective call of the ranks.\n"
    "With two ranks or more and OMP_NUM_THREADS unset, each rank gets OMP_NUM_THREADS = this\n"
    "machine's usable CPUs / ranks (at least 1): OpenMP threads of ranks sharing CPUs spin.\n"
    "Rank 0 reads the launcher's stdin when it is not a terminal; the other ranks read /dev/null.\n"
    "\n"
    "example: aperture launch -n 4 -- ./my_program --size 1M\n";

bool started_as_a_rank() {
  // Decided as Team::from_env decides it, so a rank never tries to launch a job of its own.
  return detail::detect_launched_by(env::process()) != detail::LaunchedBy::single;
}

void launch_note(const std::string& message) {
  const std::string line = "aperture launch: " + message + "\n";
  [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
}

LaunchOptions parse_launch_args(int argc, char** argv) {
  LaunchOptions options;
  bool have_ranks = false;
  int i = 1;
  std::string value;
  while (i < argc) {
    const std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (take_option_value(argc, argv, i, "-n", "--ranks", value)) {
      options.ranks = static_cast<int>(parse_integer("-n", value, 1, kMaxRanks));
      have_ranks = true;
    } else if (take_option_value(argc, argv, i, "", "--timeout", value, "60")) {
      options.timeout_seconds = parse_seconds("--timeout", value);
    } else if (take_option_value(argc, argv, i, "", "--nodes", value, "2")) {
      options.nodes = static_cast<int>(parse_integer("--nodes", value, 1, kMaxRanks));
    } else if (take_option_value(argc, argv, i, "", "--hostfile", value, "hosts.txt")) {
      options.hostfile = value;
    } else if (arg == "--mpi") {
      options.use_mpi = true;
      ++i;
    } else if (arg == "--iris") {
      options.iris = true;
      ++i;
    } else if (!arg.empty() && arg.front() == '-') {
      throw UsageError("unknown option '" + std::string(arg) + "'; see `aperture launch --help`");
    } else {
      throw UsageError("expected `--` before the program '" + std::string(arg) +
                       "'; write: aperture launch -n 4 -- " + std::string(arg) + " ...");
    }
  }
  if (!have_ranks) throw UsageError("how many ranks? give -n N, e.g. aperture launch -n 4 -- ./my_program");
  if (i >= argc) throw UsageError("no program given after `--`; write: aperture launch -n 4 -- ./my_program");
  if (options.nodes > options.ranks)
    throw UsageError("--nodes " + std::to_string(options.nodes) + " is more nodes than the " +
                     std::to_string(options.ranks) + " ranks of -n; give at most one node per rank");
  if (!options.hostfile.empty() && !options.use_mpi)
    throw UsageError("--hostfile is read by mpirun: add --mpi, e.g. aperture launch --mpi --nodes 2 --hostfile " +
                     options.hostfile + " -n 4 -- ./my_program");
  if (options.use_mpi && !options.hostfile.empty() && options.ranks % options.nodes != 0)
    throw UsageError("--mpi --hostfile places the same number of ranks on every node: -n " +
                     std::to_string(options.ranks) + " is not a multiple of --nodes " + std::to_string(options.nodes));
  options.program = argv[i];
  options.program_path = resolve_program(options.program);
  if (options.iris) {
    // `python prog.py` becomes `python -m aperture.iris prog.py`: the program's `import iris` is then
    // aperture.iris (python/aperture/iris/__main__.py), in each rank and in the processes it starts.
    const std::string_view base = std::string_view(options.program).substr(options.program.rfind('/') + 1);
    if (base.rfind("python", 0) != 0)
      throw UsageError("--iris runs a Python program on aperture.iris, so the command must start with the Python "
                       "interpreter (e.g. aperture launch --iris -n 2 -- python prog.py, or -- python -m pytest ...); "
                       "got '" + options.program + "'");
    options.args = {"-m", "aperture.iris"};
  }
  for (++i; i < argc; ++i) options.args.emplace_back(argv[i]);
  return options;
}

int launch(const LaunchOptions& options) {
  return options.use_mpi ? run_mpi_launch(options) : run_local_launch(options);
}

int launch_main(int argc, char** argv) {
  for (int i = 1; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::cout << kLaunchUsage;
      return 0;
    }
  }
  LaunchOptions options;
  try {
    options = parse_launch_args(argc, argv);
  } catch (const UsageError& e) {
    launch_note(e.what());
    return kExitUsage;
  }
  return launch(options);
}

}  // namespace aperture::launcher
