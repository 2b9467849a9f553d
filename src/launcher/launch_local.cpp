// src/launcher/launch_local.cpp — `aperture launch` without MPI: the launcher serves the hub, forks the
// ranks and watches them until the last one is gone.
//
// One poll() loop waits on everything at once: the signalfd (a rank ended, or someone wants the
// job stopped) and the stdout/stderr pipe of every rank. Its timeout is the nearest deadline
// (the job's --timeout, or the end of the grace period of a stop), so the launcher sleeps unless
// something happens.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cpu_share.h"
#include "launch_modes.h"
#include "line_forwarder.h"
#include "nccl_host_id.h"
#include "node_gpus.h"
#include "node_place.h"
#include "reaper.h"
#include "signals.h"
#include "spawn.h"
#include "torch_variables.h"
#include "watchdog.h"

#include "launcher/args.h"
#include "launcher/launch.h"
#include "launcher/program_path.h"
#include "launcher/wait_status.h"

#include "aperture/detail/host_wait.h"  // timeout_seconds(): APERTURE_TIMEOUT, the hub's limit too
#include "bootstrap/hub.h"
#include "common/env.h"

namespace aperture::launcher {

namespace {

using Clock = std::chrono::steady_clock;
// How long ranks get between the polite signal and SIGKILL.
constexpr auto kGrace = std::chrono::seconds(2);

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  std::optional<LineForwarder> out;
  std::optional<LineForwarder> err;
};

// "1, 3 and 7", at most `limit` numbers then "and N more".
std::string rank_list(const std::vector<int>& ranks, std::size_t limit = 16) {
  std::string text;
  const std::size_t shown = std::min(ranks.size(), limit);
  for (std::size_t i = 0; i < shown; ++i) {
    if (i > 0) text += (i + 1 == shown && shown == ranks.size()) ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  if (shown < ranks.size()) text += " and " + std::to_string(ranks.size() - shown) + " more";
  return text;
}

// APERTURE_NODE_EXEC split into words (at spaces; no quoting), {node} replaced by `node`.
std::vector<std::string> node_command(const std::string& command, int node) {
  std::vector<std::string> words;
  std::size_t at = 0;
  while (at < command.size()) {
    const std::size_t start = command.find_first_not_of(' ', at);
    if (start == std::string::npos) break;
    const std::size_t end = std::min(command.find(' ', start), command.size());
    std::string word = command.substr(start, end - start);
    for (std::size_t p; (p = word.find("{node}")) != std::string::npos;) word.replace(p, 6, std::to_string(node));
    words.push_back(std::move(word));
    at = end;
  }
  return words;
}

std::string plural(std::size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}

class LocalJob {
 public:
  LocalJob(const LaunchOptions& options, SignalWatch& signals, Watchdog& watchdog, detail::Hub& hub,
           const std::string& token)
      : options_(options),
        signals_(signals),
        watchdog_(watchdog),
        hub_(hub),
        token_(token),
        out_(STDOUT_FILENO),
        err_(STDERR_FILENO),
        pgid_(watchdog.group()) {}

  int run() {
    if (options_.timeout_seconds)
      job_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(*options_.timeout_seconds));
    start_ranks();
    while (std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; })) wait_for_events();
    finish();
    if (!exit_code_ && !skipped_.empty()) {
      launch_note((skipped_.size() == 1 ? "rank " : "ranks ") + rank_list(skipped_) + " of " +
                  std::to_string(options_.ranks) + " skipped (exit status " + std::to_string(kExitSkip) +
                  "); the job counts as skipped");
      return kExitSkip;
    }
    return exit_code_.value_or(0);
  }

 private:
  void start_ranks() {
    ranks_.reserve(static_cast<std::size_t>(options_.ranks));
    std::vector<std::string> argv{options_.program};
    argv.insert(argv.end(), options_.args.begin(), options_.args.end());
    // Rank 0 may read piped input; a terminal stays with the launcher (the ranks run in a
    // background process group, where reading the terminal would stop them).
    const bool stdin_for_rank0 = ::isatty(STDIN_FILENO) == 0;
    int master_port = 0;
    try {
      master_port = free_loopback_port();
    } catch (const std::exception& e) {
      fail_to_start(0, e.what(), kExitLauncherFailed);
      return;
    }

    const std::vector<std::string> gpus =
        options_.nodes > 1 ? machine_gpus(std::getenv("CUDA_VISIBLE_DEVICES")) : std::vector<std::string>{};
    // The ranks share this machine's CPUs, simulated nodes too (cpu_share.h).
    const std::optional<std::string> omp_threads =
        shared_omp_threads(options_.ranks, usable_cpus(), std::getenv("OMP_NUM_THREADS"));
    for (int r = 0; r < options_.ranks; ++r) {
      const NodePlace place = node_place(r, options_.ranks, options_.nodes);
      SpawnRequest request;
      request.path = options_.program_path;
      request.argv = argv;
      std::vector<std::pair<std::string, std::string>> env{{"APERTURE_RANK", std::to_string(r)},
                                                           {"APERTURE_WORLD_SIZE", std::to_string(options_.ranks)},
                                                           {"APERTURE_LOCAL_RANK", std::to_string(place.local_rank)},
                                                           {"APERTURE_LOCAL_SIZE", std::to_string(place.local_size)},
                                                           {"APERTURE_HUB", hub_.address()},
                                                           {"APERTURE_JOB_TOKEN", token_}};
      if (options_.nodes > 1) {
        env.emplace_back("APERTURE_NODE", std::to_string(place.node));
        if (auto host_id = nccl_host_id(place.node, std::getenv("NCCL_HOSTID"))) env.push_back(std::move(*host_id));
        if (auto visible = node_visible_devices(r, options_.ranks, place, gpus))
          env.emplace_back("CUDA_VISIBLE_DEVICES", std::move(*visible));
        if (!node_exec_.empty()) {
          // The rank runs on its node: the node's command, then the program's.
          std::vector<std::string> on_node = node_command(node_exec_, place.node);
          try {
            if (on_node.empty()) throw UsageError("APERTURE_NODE_EXEC is blank: unset it or give a command");
            request.path = resolve_program(on_node.front());
          } catch (const UsageError& e) {
            fail_to_start(r, std::string("APERTURE_NODE_EXEC: ") + e.what(), kExitUsage);
            return;
          }
          on_node.insert(on_node.end(), argv.begin(), argv.end());
          on_node.front() = request.path;
          on_node[on_node.size() - argv.size()] = options_.program_path;
          request.argv = std::move(on_node);
        }
      }
      // torch.distributed.init_process_group works in the ranks as under torchrun; across nodes
      // the rendezvous address is the user's to give (rank 0's node is not known here).
      const int torch_port = options_.nodes > 1 ? 0 : master_port;
      for (auto& variable : torch_variables(r, options_.ranks, place.local_rank, place.local_size, torch_port))
        env.push_back(std::move(variable));
      if (omp_threads) env.emplace_back("OMP_NUM_THREADS", *omp_threads);
      request.env = environment_with(env);
      request.process_group = pgid_;
      request.inherit_stdin = r == 0 && stdin_for_rank0;
      request.signals = &signals_;
      SpawnedProcess spawned;
      try {
        spawned = spawn_process(request);
      } catch (const ExecError& e) {
        fail_to_start(r, e.what(), kExitUsage);
        return;
      } catch (const std::exception& e) {
        fail_to_start(r, e.what(), kExitLauncherFailed);
        return;
      }
      if (pgid_ == 0) pgid_ = spawned.pid;  // no watchdog: rank 0 leads the group
      Rank& rank = ranks_.emplace_back();
      rank.rank = r;
      rank.pid = spawned.pid;
      rank.running = true;
      const std::string prefix = "[rank " + std::to_string(r) + "] ";
      rank.out.emplace(spawned.stdout_fd, prefixed_lines(out_, options_.prefix_stdout ? prefix : ""));
      rank.err.emplace(spawned.stderr_fd, prefixed_lines(err_, prefix));
    }
  }

  void fail_to_start(int rank, const std::string& why, int code) {
    launch_note("could not start rank " + std::to_string(rank) + ": " + why);
    set_exit_code(code);
    hub_.report_rank_exit(rank, "rank " + std::to_string(rank) + " could not be started: " + why);
    stop(SIGKILL);
  }

  void wait_for_events() {
    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
    std::vector<LineForwarder*> readers{nullptr};
    for (Rank& rank : ranks_) {
      for (auto* reader : {&rank.out, &rank.err}) {
        if (*reader && (*reader)->is_open()) {
          fds.push_back({(*reader)->fd(), POLLIN, 0});
          readers.push_back(&**reader);
        }
      }
    }
    const int ready = ::poll(fds.data(), fds.size(), poll_timeout_ms());
    if (ready < 0 && errno != EINTR) {
      // Without poll there is no telling what happens next: end the job here and now.
      launch_note(std::string("poll failed: ") + std::strerror(errno) + "; killing the job");
      set_exit_code(kExitLauncherFailed);
      kill_now();
      for (Rank& rank : ranks_) {
        int status = 0;
        if (rank.running && ::waitpid(rank.pid, &status, 0) == rank.pid) rank.running = false;
      }
      return;
    }
    for (std::size_t i = 1; ready > 0 && i < fds.size(); ++i)
      if (fds[i].revents != 0) readers[i]->read_available();
    if (ready > 0 && fds[0].revents != 0) handle_signals();
    check_deadlines();
  }

  int poll_timeout_ms() const {
    std::optional<Clock::time_point> next;
    if (job_deadline_ && !stopping_) next = job_deadline_;
    if (kill_deadline_ && (!next || *kill_deadline_ < *next)) next = kill_deadline_;
    if (!next) return -1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*next - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left + 1, 0, 60'000));
  }

  void handle_signals() {
    for (const int sig : signals_.take()) {
      if (sig == SIGCHLD) continue;  // reaped below, whatever the number of SIGCHLDs merged
      if (!stopping_) {
        launch_note("got " + signal_name(sig) + "; stopping " + plural(running_count(), "rank", "ranks") + " (" +
                    signal_name(sig) + " now, SIGKILL after " + seconds_text(kGrace.count()) + ")");
        set_exit_code(128 + sig);
        stop(sig);
      } else if (!killed_) {
        launch_note("got " + signal_name(sig) + " again; sending SIGKILL now");
        kill_now();
      }
    }
    reap();
  }

  void reap() {
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      // Anything else is a process a rank left behind and we adopted (we are a subreaper).
      const auto it = std::find_if(ranks_.begin(), ranks_.end(), [&](const Rank& r) { return r.pid == pid; });
      if (it != ranks_.end()) on_rank_exit(*it, status);
    }
  }

  void on_rank_exit(Rank& rank, int status) {
    rank.running = false;
    // Its last words come before the verdict.
    rank.out->drain();
    rank.err->drain();
    const std::string description =
        "rank " + std::to_string(rank.rank) + " (pid " + std::to_string(rank.pid) + ") " + describe_wait_status(status);
    // A skip is no failure: the others go on (if they wait for this rank, the hub fails them,
    // and that failure is the job's status), and a later failure of another rank still counts.
    const bool skipped = !stopping_ && WIFEXITED(status) && WEXITSTATUS(status) == kExitSkip;
    if (skipped) {
      skipped_.push_back(rank.rank);
      std::sort(skipped_.begin(), skipped_.end());
    }
    if (succeeded(status) || skipped) {
      // Normal. The hub ignores it when the rank left its Team properly; otherwise (it never
      // joined, or skipped its Team's destructor) ranks waiting for it fail now, not at the timeout.
      hub_.report_rank_exit(rank.rank, description + " without leaving the team (it never joined, or exited " +
                                           "without destroying its Team)");
      return;
    }
    if (stopping_) {
      // Stopping: a rank that ends by our signal says nothing new, but one killed by another
      // (its whole node lost, say) is named too, so every lost rank is on the record.
      const bool ours = WIFSIGNALED(status) && (WTERMSIG(status) == stop_signal_ || (killed_ && WTERMSIG(status) == SIGKILL));
      if (WIFSIGNALED(status) && !ours) launch_note(description);
      return;
    }
    launch_note(description);
    hub_.report_rank_exit(rank.rank, description);
    set_exit_code(exit_code_of(status));
    if (running_count() > 0)
      launch_note("stopping the " + plural(running_count(), "rank", "ranks") + " still running (SIGTERM, SIGKILL after " +
                  seconds_text(kGrace.count()) + ")");
    stop(SIGTERM);
  }

  void check_deadlines() {
    const auto now = Clock::now();
    if (!stopping_ && job_deadline_ && now >= *job_deadline_) {
      std::vector<int> running;
      for (const Rank& rank : ranks_)
        if (rank.running) running.push_back(rank.rank);
      launch_note("--timeout " + seconds_text(*options_.timeout_seconds) + " expired with " +
                  (running.size() == 1 ? "rank " : "ranks ") + rank_list(running) + " of " +
                  std::to_string(options_.ranks) + " still running; stopping " + (running.size() == 1 ? "it" : "them"));
      set_exit_code(kExitTimeout);
      stop(SIGTERM);
    }
    if (kill_deadline_ && now >= *kill_deadline_) {
      std::vector<int> running;
      for (const Rank& rank : ranks_)
        if (rank.running) running.push_back(rank.rank);
      if (!running.empty())
        launch_note((running.size() == 1 ? "rank " : "ranks ") + rank_list(running) + " did not stop within " +
                    seconds_text(kGrace.count()) + "; sending SIGKILL");
      kill_now();
    }
  }

  // Stops the job: `sig` to the whole process group now, SIGKILL when the grace period ends.
  void stop(int sig) {
    if (stopping_) return;
    stopping_ = true;
    stop_signal_ = sig;
    if (sig == SIGKILL) return kill_now();
    if (pgid_ > 0) ::kill(-pgid_, sig);
    kill_deadline_ = Clock::now() + kGrace;
  }

  void kill_now() {
    stopping_ = killed_ = true;
    kill_deadline_.reset();
    if (pgid_ > 0) ::kill(-pgid_, SIGKILL);
  }

  // Every rank is reaped: pass on what is left in the pipes, then kill whatever the ranks left
  // behind (it may hold a pipe open), and pass on their partial last lines.
  void finish() {
    for (Rank& rank : ranks_) {
      rank.out->drain();
      rank.err->drain();
    }
    watchdog_.release();  // before the sweep, which would otherwise count it as a leftover
    const int leftovers = kill_leftovers(pgid_);
    if (leftovers > 0)
      launch_note("killed " + plural(static_cast<std::size_t>(leftovers), "process", "processes") +
                  " the ranks had started and left running");
    for (Rank& rank : ranks_) {
      rank.out->drain();
      rank.err->drain();
      rank.out->close();
      rank.err->close();
    }
  }

  std::size_t running_count() const {
    return static_cast<std::size_t>(std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; }));
  }

  // The first reason the job failed decides its exit code.
  void set_exit_code(int code) {
    if (!exit_code_) exit_code_ = code;
  }

  const LaunchOptions& options_;
  const std::string node_exec_ = env::node_exec();
  SignalWatch& signals_;
  Watchdog& watchdog_;
  detail::Hub& hub_;
  std::string token_;
  OutputSink out_;
  OutputSink err_;
  std::vector<Rank> ranks_;
  pid_t pgid_ = 0;  // the job's process group: the watchdog's
  std::optional<Clock::time_point> job_deadline_;
  std::optional<Clock::time_point> kill_deadline_;
  bool stopping_ = false;
  int stop_signal_ = 0;  // what stop() sent
  bool killed_ = false;
  std::optional<int> exit_code_;
  std::vector<int> skipped_;  // ranks that exited kExitSkip
};

}  // namespace

int run_local_launch(const LaunchOptions& options) {
  // Before the hub: its threads must inherit the blocked signal mask.
  std::optional<SignalWatch> signals;
  try {
    signals.emplace();
  } catch (const std::exception& e) {
    launch_note(e.what());
    return kExitLauncherFailed;
  }
  become_subreaper();
  // After the SignalWatch (it inherits the blocked mask, so SIGINT/SIGTERM leave it alone) and
  // before the hub (forking is simplest before there are threads). It leads the job's group.
  Watchdog watchdog;

  detail::HubOptions hub_options;
  hub_options.world_size = options.ranks;
  hub_options.token = detail::make_job_token();
  // An abstract Unix socket is private to its network namespace: ranks on other nodes reach
  // the hub over TCP.
  if (options.nodes > 1) {
    hub_options.transport = "tcp";
    hub_options.bind_host = env::hub_host().value_or("127.0.0.1");
  } else {
    hub_options.transport = "unix";
  }
  std::unique_ptr<detail::Hub> hub;
  try {
    hub_options.timeout = std::chrono::milliseconds(static_cast<long long>(detail::timeout_seconds() * 1000.0));
  } catch (const Error& e) {
    launch_note(std::string(e.detail()));  // after "aperture launch: ", no second "aperture: "
    return kExitUsage;
  }
  try {
    hub = std::make_unique<detail::Hub>(hub_options);
  } catch (const std::exception& e) {
    launch_note(std::string("could not start the rendezvous hub: ") + e.what());
    return kExitLauncherFailed;
  }
  LocalJob job(options, *signals, watchdog, *hub, hub_options.token);
  return job.run();
}

}  // namespace aperture::launcher
