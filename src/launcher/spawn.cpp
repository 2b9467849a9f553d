// src/launcher/spawn.cpp — start one child the launcher's way.
#include "spawn.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "signals.h"

extern char** environ;

namespace aperture::launcher {

namespace {

struct Pipe {
  int read = -1;
  int write = -1;
};

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2 failed: ") + std::strerror(errno));
  return {fds[0], fds[1]};
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const auto& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// The child's side: system calls only, then exec or _exit.
[[noreturn]] void become_child(const SpawnRequest& request, pid_t launcher, int null_fd, const Pipe& out,
                               const Pipe& err, const Pipe& exec_error, char* const* argv, char* const* envp,
                               const rlimit& original_files) {
  auto fail = [&](int error) {
    [[maybe_unused]] ssize_t ignored = ::write(exec_error.write, &error, sizeof error);
    ::_exit(127);
  };
  // Join the job's group before anything else, so a stop signal to the group reaches us.
  ::setpgid(0, request.process_group);
  // Die with the launcher. Its death may already have happened: then our parent is no longer it.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(errno);
  if (::getppid() != launcher) ::_exit(127);
  if (!request.inherit_stdin && ::dup2(null_fd, STDIN_FILENO) < 0) fail(errno);
  if (::dup2(out.write, STDOUT_FILENO) < 0 || ::dup2(err.write, STDERR_FILENO) < 0) fail(errno);
  // Every other descriptor is ours and already close-on-exec; this is the safety net for any a
  // library opened without it.
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  ::setrlimit(RLIMIT_NOFILE, &original_files);
  if (request.signals != nullptr) request.signals->restore_in_child();
  ::execve(request.path.c_str(), argv, envp);
  fail(errno);
  ::_exit(127);
}

// The launcher holds two pipes per rank; 1024 ranks need more than the usual soft limit of 1024
// descriptors. Raised once here; each child gets the original limit back.
rlimit raise_file_limit() {
  static const rlimit original = [] {
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &raised);
    return limit;
  }();
  return original;
}

}  // namespace

SpawnedProcess spawn_process(const SpawnRequest& request) {
  const rlimit original_files = raise_file_limit();
  const auto argv = c_strings(request.argv);
  const auto envp = c_strings(request.env);

  Pipe out = make_pipe();
  Pipe err{}, exec_error{};
  int null_fd = -1;
  try {
    err = make_pipe();
    exec_error = make_pipe();
    null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0) throw std::runtime_error(std::string("open(/dev/null) failed: ") + std::strerror(errno));
  } catch (...) {
    for (int* fd : {&out.read, &out.write, &err.read, &err.write, &exec_error.read, &exec_error.write}) close_fd(*fd);
    throw;
  }

  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) become_child(request, launcher, null_fd, out, err, exec_error, argv.data(), envp.data(), original_files);

  const int fork_error = errno;
  for (int* fd : {&out.write, &err.write, &exec_error.write, &null_fd}) close_fd(*fd);
  if (pid < 0) {
    for (int* fd : {&out.read, &err.read, &exec_error.read}) close_fd(*fd);
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(fork_error) +
                             "; too many processes? lower -n or raise `ulimit -u`");
  }
  // Also set the group from this side: whichever of us runs first, the child is in the group
  // before we signal it. (EACCES once it has exec'd is fine: it set the group itself.)
  ::setpgid(pid, request.process_group == 0 ? pid : request.process_group);

  // Blocks until the child execs (the pipe closes: nothing to read) or reports why it could not.
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_error.read, &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  close_fd(exec_error.read);
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    close_fd(out.read);
    close_fd(err.read);
    throw ExecError("cannot execute '" + request.path + "': " + std::strerror(exec_errno) +
                    (exec_errno == ENOEXEC ? " (not a program this machine runs; a script needs a #! first line)" : ""));
  }
  return {pid, out.read, err.read};
}

std::vector<std::string> environment_with(const std::vector<std::pair<std::string, std::string>>& set,
                                          const std::vector<std::string>& unset) {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::string_view name = text.substr(0, text.find('='));
    const bool replaced = std::any_of(set.begin(), set.end(), [&](const auto& kv) { return kv.first == name; }) ||
                          std::find(unset.begin(), unset.end(), name) != unset.end();
    if (!replaced) env.emplace_back(text);
  }
  for (const auto& [name, value] : set) env.push_back(name + "=" + value);
  return env;
}

}  // namespace aperture::launcher
