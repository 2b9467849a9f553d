// src/launcher/launch_mpi.cpp — `aperture launch --mpi`: the ranks are started by Open MPI's mpirun.
//
// The mpi-window and openshmem providers need memory that MPI owns, which only ranks MPI itself
// started can have; Team::from_env() finds them through OMPI_COMM_WORLD_RANK. The launcher runs
// mpirun as its one child and keeps the rest of its promises around it:
//   - output: mpirun's "[1,R]<stdout>:" tags become "[rank R] ";
//   - failure: mpirun aborts the job by itself when a rank fails; its status is passed on;
//   - --timeout and SIGINT/SIGTERM: SIGTERM to mpirun (which stops its ranks), SIGKILL to it
//     after the grace period, and then every process it left is adopted and killed (the
//     launcher is a subreaper).
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "launch_modes.h"
#include "line_forwarder.h"
#include "mpirun_flags.h"
#include "reaper.h"
#include "signals.h"
#include "spawn.h"
#include "torch_variables.h"
#include "watchdog.h"

#include "launcher/args.h"
#include "launcher/launch.h"
#include "launcher/mpi_output_tags.h"
#include "launcher/program_path.h"
#include "launcher/wait_status.h"

#include "common/env.h"  // the variables `aperture launch` sets

namespace aperture::launcher {

namespace {

using Clock = std::chrono::steady_clock;
// mpirun's own shutdown after SIGTERM (signal the ranks, wait, SIGKILL them, collect their
// output) takes 1 to 2 s by itself, so it gets more time than a plain rank before SIGKILL.
constexpr auto kGrace = std::chrono::seconds(5);

// Variables of an enclosing `aperture launch` would make the ranks' Team join that job instead
// of MPI's.
const std::vector<std::string> kLauncherVariables = env::launcher_variables();

// Writes each tagged piece of a line from mpirun to the stream its tag names, as "[rank R] text".
LineForwarder::LineHandler untag_lines(OutputSink& out, OutputSink& err, bool mpirun_stdout, bool prefix_stdout) {
  return [&out, &err, mpirun_stdout, prefix_stdout](std::string_view line) {
    for (const TaggedPiece& piece : split_tagged_line(line)) {
      const bool to_stdout = piece.rank >= 0 ? piece.is_stdout : mpirun_stdout;
      std::string text;
      if (piece.rank >= 0 && (!to_stdout || prefix_stdout)) text = "[rank " + std::to_string(piece.rank) + "] ";
      text.append(piece.text).push_back('\n');
      (to_stdout ? out : err).write_all(text);
    }
  };
}

// Inside a Slurm allocation (sbatch, salloc) of more than one node: SLURM_JOB_NUM_NODES, which
// both set. A value that is not a number counts as one node.
bool in_slurm_allocation_of_several_nodes() {
  const char* nodes = std::getenv("SLURM_JOB_NUM_NODES");
  return nodes != nullptr && std::strtol(nodes, nullptr, 10) > 1;
}

}  // namespace

int run_mpi_launch(const LaunchOptions& options) {
  std::string mpirun;
  std::string self;
  try {
    mpirun = resolve_program("mpirun");
    self = self_executable();
  } catch (const UsageError& e) {
    launch_note(std::string("--mpi needs Open MPI's mpirun: ") + e.what() +
                " (Debian/Ubuntu: apt-get install openmpi-bin)");
    return kExitUsage;
  } catch (const std::exception& e) {
    launch_note(e.what());
    return kExitLauncherFailed;
  }

  std::optional<SignalWatch> signals;
  try {
    signals.emplace();
  } catch (const std::exception& e) {
    launch_note(e.what());
    return kExitLauncherFailed;
  }
  become_subreaper();
  Watchdog watchdog;

  SpawnRequest request;
  request.path = mpirun;
  request.argv = {"mpirun", "-n", std::to_string(options.ranks)};
  const std::size_t flags_at = request.argv.size();
  request.argv.insert(request.argv.end(), kMpirunFlags.begin(), kMpirunFlags.end());
  // Ranks on other nodes (a hostfile's, or a Slurm allocation's, whose nodes mpirun reads by
  // itself) meet over TCP as well as shared memory.
  const bool across_nodes = !options.hostfile.empty() || in_slurm_allocation_of_several_nodes();
  if (across_nodes) {
    for (std::size_t i = flags_at; i + 1 < request.argv.size(); ++i)
      if (request.argv[i] == "btl") request.argv[i + 1] = "self,vader,tcp";
  }
  if (!options.hostfile.empty())
    request.argv.insert(request.argv.end(), {"--hostfile", options.hostfile, "--map-by",
                                             "ppr:" + std::to_string(options.ranks / options.nodes) + ":node"});
  request.argv.push_back("--tag-output");
  // Each rank starts as the shim, which rejoins the job's group and becomes the program.
  request.argv.push_back(self);
  request.argv.push_back(kMpiRankShim);
  request.argv.push_back(std::to_string(watchdog.group()));
  request.argv.push_back("--");
  request.argv.push_back(options.program_path);
  request.argv.insert(request.argv.end(), options.args.begin(), options.args.end());
  std::vector<std::pair<std::string, std::string>> set;
  // Open MPI refuses to run as root unless told twice; containers and CI often run as root.
  if (::geteuid() == 0) set = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
  // torch.distributed's rendezvous; the shim adds RANK, WORLD_SIZE, LOCAL_RANK from Open MPI's.
  // Across nodes rank 0's address is the user's to give, as without --mpi: a loopback one would
  // send the other nodes' ranks to their own machine.
  if (!across_nodes) {
    try {
      set.emplace_back("MASTER_ADDR", "127.0.0.1");
      set.emplace_back("MASTER_PORT", std::to_string(free_loopback_port()));
    } catch (const std::exception& e) {
      launch_note(e.what());
      return kExitLauncherFailed;
    }
  }
  // Without a hostfile the nodes are a split of this machine, made by each rank's Team.
  if (options.nodes > 1 && options.hostfile.empty()) set.emplace_back("APERTURE_NODES", std::to_string(options.nodes));
  request.env = environment_with(set, kLauncherVariables);
  request.inherit_stdin = ::isatty(STDIN_FILENO) == 0;
  request.signals = &*signals;
  // mpirun leads a group of its own: in its ranks' group it reports every failure as status 1.
  request.process_group = 0;

  SpawnedProcess spawned;
  try {
    spawned = spawn_process(request);
  } catch (const std::exception& e) {
    launch_note(std::string("could not start mpirun: ") + e.what());
    return kExitLauncherFailed;
  }

  OutputSink out(STDOUT_FILENO), err(STDERR_FILENO);
  LineForwarder mpirun_out(spawned.stdout_fd, untag_lines(out, err, true, options.prefix_stdout));
  LineForwarder mpirun_err(spawned.stderr_fd, untag_lines(out, err, false, options.prefix_stdout));

  std::optional<Clock::time_point> job_deadline, kill_deadline;
  if (options.timeout_seconds)
    job_deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(*options.timeout_seconds));
  std::optional<int> exit_code;
  bool stopping = false;
  const auto stop = [&](int sig) {
    if (stopping) return;
    stopping = true;
    ::kill(spawned.pid, sig);
    // mpirun signals only the ranks themselves; what they started still holds their output
    // open, and mpirun waits for it. The job's group reaches all of them.
    if (watchdog.group() > 0) ::kill(-watchdog.group(), sig);
    kill_deadline = Clock::now() + kGrace;
  };
  const auto kill_now = [&] {
    kill_deadline.reset();
    if (watchdog.group() > 0) ::kill(-watchdog.group(), SIGKILL);  // the ranks, moved there by the shim
    ::kill(-spawned.pid, SIGKILL);                                 // mpirun's own group
  };

  std::optional<int> mpirun_status;
  while (!mpirun_status) {
    std::optional<Clock::time_point> next = stopping ? kill_deadline : job_deadline;
    int timeout_ms = -1;
    if (next)
      timeout_ms = static_cast<int>(std::clamp<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(*next - Clock::now()).count() + 1, 0, 60'000));
    std::vector<pollfd> fds{{signals->fd(), POLLIN, 0}};
    std::vector<LineForwarder*> readers{nullptr};
    for (LineForwarder* reader : {&mpirun_out, &mpirun_err}) {
      if (reader->is_open()) {
        fds.push_back({reader->fd(), POLLIN, 0});
        readers.push_back(reader);
      }
    }
    const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
    for (std::size_t i = 1; ready > 0 && i < fds.size(); ++i)
      if (fds[i].revents != 0) readers[i]->read_available();
    if (ready > 0 && fds[0].revents != 0) {
      for (const int sig : signals->take()) {
        if (sig == SIGCHLD) continue;
        if (!stopping) {
          launch_note("got " + signal_name(sig) + "; stopping mpirun (pid " + std::to_string(spawned.pid) +
                      ") and its ranks");
          if (!exit_code) exit_code = 128 + sig;
          stop(sig);
        } else {
          launch_note("got " + signal_name(sig) + " again; sending SIGKILL now");
          kill_now();
        }
      }
      int status = 0;
      pid_t pid;
      while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0)
        if (pid == spawned.pid) mpirun_status = status;
    }
    const auto now = Clock::now();
    if (!stopping && job_deadline && now >= *job_deadline) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", *options.timeout_seconds);
      launch_note(std::string("--timeout ") + seconds + " s expired with mpirun (pid " + std::to_string(spawned.pid) +
                  ") and its " + std::to_string(options.ranks) + " ranks still running; stopping them");
      if (!exit_code) exit_code = kExitTimeout;
      stop(SIGTERM);
    }
    if (kill_deadline && now >= *kill_deadline) {
      launch_note("mpirun did not stop within " + std::to_string(kGrace.count()) + " s; sending SIGKILL");
      kill_now();
    }
  }

  mpirun_out.drain();
  mpirun_err.drain();
  watchdog.release();
  const int leftovers = kill_leftovers(watchdog.group() > 0 ? watchdog.group() : spawned.pid);
  if (leftovers > 0)
    launch_note("killed " + std::to_string(leftovers) + " processes mpirun left running");
  mpirun_out.drain();
  mpirun_err.drain();
  mpirun_out.close();
  mpirun_err.close();

  if (!succeeded(*mpirun_status) && !exit_code) {
    launch_note("mpirun (pid " + std::to_string(spawned.pid) + ") " + describe_wait_status(*mpirun_status) +
                "; its messages above name the rank that failed");
    exit_code = exit_code_of(*mpirun_status);
  }
  return exit_code.value_or(0);
}

}  // namespace aperture::launcher
