// tools/info.cpp — `aperture info`: what this build can do on this machine.
//
// The version, every known provider with whether it runs here (and why not), the default
// provider, the CPUs, the GPUs with which pairs can reach each other, and the team when run as a rank of a job. Under a launcher every rank
// prints its team line; only rank 0 prints the rest, so `aperture launch -n 4 -- aperture info`
// stays readable.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>

#include "commands.h"
#include "info_gpu.h"

#include "launcher/launch.h"

#include "aperture/config.h"
#include "aperture/provider.h"
#include "aperture/team.h"

namespace aperture::cli {

namespace {

const char* const kInfoUsage =
    "usage: aperture info\n"
    "\n"
    "Prints the aperture version, each provider and whether it can run on this machine (or why\n"
    "not), the default provider, the CPUs, the GPUs and which pairs reach each other (peer\n"
    "access), and the team when run as a rank of a job (e.g.\n"
    "`aperture launch -n 2 -- aperture info`).\n";


void print_providers() {
  const auto statuses = provider_statuses();
  std::size_t width = std::strlen("provider");
  for (const auto& s : statuses) width = std::max(width, s.name.size());
  const int w = static_cast<int>(width);
  std::printf("providers:\n");
  std::printf("  %-*s  %-11s  %s\n", w, "provider", "status", "detail");
  for (const auto& s : statuses) {
    const char* standing = s.available ? "available" : (s.compiled_in ? "unavailable" : "not built");
    std::printf("  %-*s  %-11s  %s\n", w, s.name.c_str(), standing, s.reason.c_str());
  }
  std::string default_name;
  try {
    default_name = default_provider_name();
  } catch (const std::exception& e) {
    default_name = std::string("none (") + e.what() + ")";
  }
  std::printf("default provider: %s\n", default_name.c_str());
}

void print_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  const int usable = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : static_cast<int>(online);
  std::printf("CPUs: %d usable here (%ld online); `aperture launch -n N` runs any N up to 1024, more ranks than CPUs "
              "share them\n",
              usable, online);
}

// "nodes: 2 (node 0: ranks 0-1, node 1: ranks 2-3)": which ranks share memory.
void print_nodes(const Team& team) {
  std::string layout;
  for (int node = 0; node < team.node_count(); ++node) {
    std::string ranks;
    for (int r = 0; r < team.size(); ++r) {
      if (team.node_of(r) != node) continue;
      const bool run_continues = r > 0 && team.node_of(r - 1) == node;
      const bool run_goes_on = r + 1 < team.size() && team.node_of(r + 1) == node;
      if (!run_continues) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
      else if (!run_goes_on) ranks += "-" + std::to_string(r);
    }
    layout += (node ? ", " : "") + std::string("node ") + std::to_string(node) + ": ranks " + ranks;
  }
  std::printf("nodes: %d (%s); ranks on different nodes share no memory\n", team.node_count(), layout.c_str());
}

}  // namespace

int info_main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::cout << kInfoUsage;
      return 0;
    }
    std::cerr << "aperture info: unknown argument '" << argv[i] << "'; `aperture info` takes none\n";
    return 2;
  }

  // Joining the team is collective: every rank of the job runs `aperture info`, so all join.
  std::optional<Team> team;
  std::string team_line = "team: none (not started as a rank of a job; run under `aperture launch -n N` to see one)";
  int exit_code = 0;
  if (launcher::started_as_a_rank()) {
    try {
      team.emplace(Team::from_env());
      team_line = "team: rank " + std::to_string(team->rank()) + " of " + std::to_string(team->size()) + " (local " +
                  std::to_string(team->local_rank()) + " of " + std::to_string(team->local_size()) + " on node " +
                  std::to_string(team->node()) + "), started by " + std::string(team->launched_by());
    } catch (const std::exception& e) {
      team_line = std::string("team: could not join the job: ") + e.what();
      exit_code = 1;
    }
  }

  if (!team || team->rank() == 0) {
    std::printf("aperture %s\n", APERTURE_VERSION_STRING);
    print_providers();
    print_cpus();
    print_gpus();
    if (team) print_nodes(*team);
  }
  std::printf("%s\n", team_line.c_str());
  std::fflush(stdout);
  return exit_code;
}

}  // namespace aperture::cli
