// tools/launch.h — `aperture launch`: start N ranks of a program on this machine.
//
// Two ways to start them:
//   - ours (default): the launcher serves the rendezvous hub, forks the ranks with APERTURE_RANK,
//     APERTURE_WORLD_SIZE, APERTURE_LOCAL_RANK, APERTURE_LOCAL_SIZE, APERTURE_HUB and
//     APERTURE_JOB_TOKEN, and watches them (launch_local.cpp);
//   - --mpi: through Open MPI's mpirun, for the providers whose memory MPI owns (mpi-window,
//     openshmem), which need ranks MPI itself started (launch_mpi.cpp).
// Either way: output comes back line by line as "[rank R] ...", the job fails as soon as a rank
// fails, --timeout bounds the whole job, and no process is left behind.
//
// Exit codes: 0 when every rank exited 0; the first failing rank's status (128 + N when it was
// killed by signal N) when one failed; 124 when --timeout expired; 128 + N when the launcher got
// signal N (SIGINT, SIGTERM, SIGHUP); 2 for bad arguments (including a program that is missing or
// not executable); 125 when the launcher itself failed (fork, pipes, the hub).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace aperture::cli {

inline constexpr int kMaxRanks = 1024;

struct LaunchOptions {
  int ranks = 0;
  std::optional<double> timeout_seconds;  // --timeout: wall-clock limit for the whole job
  bool use_mpi = false;                   // --mpi: start the ranks through mpirun
  std::string program;                    // as given: the ranks' argv[0]
  std::string program_path;               // what is exec'd (PATH searched)
  std::vector<std::string> args;          // the program's arguments
  bool prefix_stdout = true;              // "[rank R] " before stdout lines (the demo's report goes bare)
};

// Parses the arguments after "launch"; throws UsageError. Resolves the program.
LaunchOptions parse_launch_args(int argc, char** argv);

// Runs the job and returns the launcher's exit code (see above).
int run_launch(const LaunchOptions& options);
int run_local_launch(const LaunchOptions& options);
int run_mpi_launch(const LaunchOptions& options);

// True when a launcher started this process as one rank of a job (`aperture launch`, mpirun or
// torchrun left their variables): a command then takes part instead of launching.
bool started_as_a_rank();

// "aperture launch: " + message + "\n" on stderr.
void launch_note(const std::string& message);

// The `launch` subcommand: argv[0] is "launch".
int launch_main(int argc, char** argv);
extern const char* const kLaunchUsage;

}  // namespace aperture::cli
