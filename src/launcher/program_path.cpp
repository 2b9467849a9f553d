// src/launcher/program_path.cpp — find the program a launch will run.
#include "launcher/program_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "launcher/args.h"

namespace aperture::launcher {

namespace {

enum class Candidate { missing, directory, not_executable, ok };

Candidate inspect(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Candidate::missing;
  if (S_ISDIR(st.st_mode)) return Candidate::directory;
  if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) return Candidate::not_executable;
  return Candidate::ok;
}

std::string mode_text(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  char text[16];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return text;
}

}  // namespace

std::string resolve_program(const std::string& program) {
  if (program.empty()) throw UsageError("the program name is empty; give the program to run after `--`");

  if (program.find('/') != std::string::npos) {
    switch (inspect(program)) {
      case Candidate::ok: return program;
      case Candidate::missing:
        throw UsageError("program '" + program + "' does not exist; check the path (relative paths start from " +
                         "the current directory)");
      case Candidate::directory: throw UsageError("program '" + program + "' is a directory, not a program");
      case Candidate::not_executable:
        throw UsageError("program '" + program + "' is not executable (mode " + mode_text(program) + "); run chmod +x " +
                         program);
    }
  }

  // PATH search, as execvp does it: an empty entry means the current directory, an unset PATH
  // means the system default. A match that is not executable is remembered but the search goes on.
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env != nullptr ? path_env : "/bin:/usr/bin";
  std::optional<std::string> not_executable;
  std::size_t at = 0;
  while (at <= path.size()) {
    const std::size_t colon = std::min(path.find(':', at), path.size());
    std::string dir = path.substr(at, colon - at);
    at = colon + 1;
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + program;
    const Candidate found = inspect(candidate);
    if (found == Candidate::ok) return candidate;
    if (found == Candidate::not_executable && !not_executable) not_executable = candidate;
  }
  if (not_executable)
    throw UsageError("program '" + program + "' was found as " + *not_executable + " but it is not executable (mode " +
                     mode_text(*not_executable) + "); run chmod +x " + *not_executable);
  throw UsageError("program '" + program + "' was not found on PATH (" + path +
                   "); give its path (e.g. ./" + program + ") or fix PATH");
}

std::string self_executable() {
  char buffer[4096];
  const ssize_t length = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (length <= 0)
    throw std::runtime_error(std::string("readlink(/proc/self/exe) failed: ") + std::strerror(errno) +
                             "; is /proc mounted?");
  return std::string(buffer, static_cast<std::size_t>(length));
}

}  // namespace aperture::launcher
