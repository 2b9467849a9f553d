// launcher/launch.h — the launcher component: start N ranks of a program on this machine and
// return the job's exit status. `aperture launch` is this, with its arguments parsed.
//
// Two ways to start the ranks:
//   - ours (default): the launcher serves the rendezvous hub, forks the ranks with APERTURE_RANK,
//     APERTURE_WORLD_SIZE, APERTURE_LOCAL_RANK, APERTURE_LOCAL_SIZE, APERTURE_HUB and
//     APERTURE_JOB_TOKEN, and watches them (launch_local.cpp);
//   - use_mpi: through Open MPI's mpirun, for the providers whose memory MPI owns (mpi-window,
//     openshmem), which need ranks MPI itself started (launch_mpi.cpp).
// Either way: output comes back line by line as "[rank R] ...", the job fails as soon as a rank
// fails, timeout_seconds bounds the whole job, and no process is left behind.
//
// Exit codes: 0 when every rank exited 0; the first failing rank's status (128 + N when it was
// killed by signal N) when one failed; kExitTimeout when the timeout expired; 128 + N when the
// launcher got signal N (SIGINT, SIGTERM, SIGHUP); kExitUsage for bad arguments (including a
// program that is missing or not executable); kExitLauncherFailed when the launcher itself failed
// (fork, pipes, the hub).
//
// A rank exiting kExitSkip (77, CTest's and automake's "skipped") is not a failure and does not
// stop the others; nor can it hide one: any other failure of any rank, before or after it, is
// the job's status. When no rank failed, the job is skipped (77) if any rank skipped, also
// when the others succeeded (a test some ranks did not run has not passed), and the launcher
// names the ranks that skipped. (Local launch; under mpirun, mpirun decides.)
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace aperture::launcher {

inline constexpr int kMaxRanks = 1024;
inline constexpr int kExitTimeout = 124;         // the job's timeout expired
inline constexpr int kExitLauncherFailed = 125;  // the launcher itself failed (fork, hub, pipes)
inline constexpr int kExitSkip = 77;             // a rank skipped (CTest's SKIP_RETURN_CODE)

struct LaunchOptions {
  int ranks = 0;
  std::optional<double> timeout_seconds;  // wall-clock limit for the whole job
  bool use_mpi = false;                   // start the ranks through mpirun
  // Nodes the ranks are spread over, in rank blocks (rank r on node r * nodes / ranks). Ours:
  // each rank gets APERTURE_NODE, the hub listens on TCP (APERTURE_HUB_HOST) and, where
  // APERTURE_NODE_EXEC is set, each rank's command is put behind it to run on its node. With
  // use_mpi: mpirun places the ranks on the hostfile's nodes, or (no hostfile) the ranks get
  // APERTURE_NODES.
  int nodes = 1;
  std::string hostfile;                   // use_mpi: an Open MPI hostfile, one line per node
  std::string program;                    // as given: the ranks' argv[0]
  std::string program_path;               // what is exec'd (resolve_program() finds it)
  std::vector<std::string> args;          // the program's arguments
  bool iris = false;                      // --iris: `python ...` runs as `python -m aperture.iris ...`
  bool prefix_stdout = true;              // "[rank R] " before stdout lines (the demo's report goes bare)
};

// Runs the job and returns its exit code (see above).
int launch(const LaunchOptions& options);

// True when a launcher started this process as one rank of a job (`aperture launch`, mpirun or
// torchrun left their variables): a command then takes part instead of launching.
bool started_as_a_rank();

// `aperture launch ...`: argv[0] is "launch". Parses the arguments after it (a bad one is a note
// on stderr and kExitUsage), then launch().
int launch_main(int argc, char** argv);
extern const char* const kLaunchUsage;
// The arguments after "launch"; throws UsageError. Resolves the program.
LaunchOptions parse_launch_args(int argc, char** argv);

// With use_mpi, mpirun starts each rank as `<this program> _mpi-rank PGID -- PROGRAM ARGS...`: a
// shim that moves the rank into the job's process group, then becomes PROGRAM. So a program that
// launches with use_mpi begins its main() with
//     if (launcher::is_mpi_rank_shim(argc, argv)) return launcher::mpi_rank_main(argc - 1, argv + 1);
bool is_mpi_rank_shim(int argc, char** argv);
int mpi_rank_main(int argc, char** argv);

}  // namespace aperture::launcher
