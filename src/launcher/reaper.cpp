// src/launcher/reaper.cpp — adopt and kill what the ranks left behind.
#include "reaper.h"

#include <dirent.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <set>
#include <vector>

namespace aperture::launcher {

namespace {

// Children of this process, from /proc/<pid>/stat ("pid (comm) state ppid ...").
std::vector<pid_t> children_of_self() {
  std::vector<pid_t> children;
  const pid_t self = ::getpid();
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return children;
  while (const dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE* file = std::fopen(path, "re");
    if (file == nullptr) continue;
    char line[1024];
    const bool ok = std::fgets(line, sizeof line, file) != nullptr;
    std::fclose(file);
    if (!ok) continue;
    const char* after_comm = std::strrchr(line, ')');  // comm may itself hold spaces and ')'
    char state = 0;
    long ppid = 0;
    if (after_comm != nullptr && std::sscanf(after_comm + 1, " %c %ld", &state, &ppid) == 2 && ppid == self)
      children.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return children;
}

}  // namespace

void become_subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }

int kill_leftovers(pid_t pgid, int limit_ms) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::milliseconds(limit_ms);
  std::set<pid_t> killed;
  if (pgid > 0 && ::kill(-pgid, 0) == 0) ::kill(-pgid, SIGKILL);
  for (;;) {
    int status = 0;
    while (::waitpid(-1, &status, WNOHANG) > 0) {
    }
    const auto children = children_of_self();
    if (children.empty() || clock::now() >= deadline) break;
    for (const pid_t child : children) {
      if (::kill(child, SIGKILL) == 0) killed.insert(child);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return static_cast<int>(killed.size());
}

}  // namespace aperture::launcher
