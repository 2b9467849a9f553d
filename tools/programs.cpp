// tools/programs.cpp — find and run the programs `aperture` runs for its subcommands.
#include "programs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "launcher/program_path.h"

namespace aperture::cli {

namespace {

// Relative to the directory of the `aperture` executable: first as installed (bin/ to
// libexec/aperture/), then as built (tools/ to libexec/aperture/); CMake computes both.
constexpr const char* kProgramDirs[] = {APERTURE_PROGRAMS_DIR_INSTALLED, APERTURE_PROGRAMS_DIR_BUILT};

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string find_program(const std::string& name) {
  const std::string self = launcher::self_executable();
  const std::string here = self.substr(0, self.rfind('/') + 1);
  std::string looked;
  for (const char* dir : kProgramDirs) {
    std::string candidate = here + dir + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    if (looked.find(candidate) == std::string::npos) looked += (looked.empty() ? "" : " or ") + candidate;
  }
  throw std::runtime_error("the program " + name + " was not found (looked for " + looked +
                           "); build it (cmake --build BUILD_DIR --target " + name + ") or install aperture again");
}

int exec_program(const std::string& path, const std::string& name, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(name.c_str()));
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  ::execv(path.c_str(), argv.data());
  std::fprintf(stderr, "aperture: cannot execute %s: %s\n", path.c_str(), std::strerror(errno));
  return 126;
}

}  // namespace aperture::cli
