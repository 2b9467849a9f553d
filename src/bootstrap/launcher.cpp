#include "bootstrap/launcher.h"

#include "aperture/team.h"

namespace aperture::detail {

namespace {

struct Mark {
  Launcher launcher;
  std::string_view name;      // Team::launched_by()
  const char* rank_variable;  // either variable of the pair marks the launcher: a pair with one
  const char* size_variable;  // missing is a malformed launch, which bootstrap/env.cpp reports
};

// In Team::from_env's order of precedence.
constexpr Mark kMarks[] = {
    {Launcher::aperture, "aperture launch", "APERTURE_RANK", "APERTURE_WORLD_SIZE"},
    {Launcher::mpirun, "mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {Launcher::torchrun, "torchrun", "RANK", "WORLD_SIZE"},
};

}  // namespace

bool has_launcher_variables(Launcher launcher, const env::Lookup& env) {
  for (const Mark& mark : kMarks)
    if (mark.launcher == launcher) return env(mark.rank_variable) != nullptr || env(mark.size_variable) != nullptr;
  return false;
}

Launcher detect_launcher(const env::Lookup& env) {
  for (const Mark& mark : kMarks)
    if (has_launcher_variables(mark.launcher, env)) return mark.launcher;
  return Launcher::single;
}

std::string_view launcher_name(Launcher launcher) {
  for (const Mark& mark : kMarks)
    if (mark.launcher == launcher) return mark.name;
  return "single";
}

Launcher launcher_of(const Team& team) {
  for (const Mark& mark : kMarks)
    if (mark.name == team.launched_by()) return mark.launcher;
  return Launcher::single;
}

}  // namespace aperture::detail
