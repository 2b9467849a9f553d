#include "bootstrap/launched_by.h"

#include "aperture/team.h"

namespace aperture::detail {

namespace {

struct Mark {
  LaunchedBy launcher;
  std::string_view name;      // Team::launched_by()
  const char* rank_variable;  // either variable of the pair marks the launcher: a pair with one
  const char* size_variable;  // missing is a malformed launch, which bootstrap/launcher_variables.cpp reports
};

// In Team::from_env's order of precedence.
constexpr Mark kMarks[] = {
    {LaunchedBy::aperture, "aperture launch", "APERTURE_RANK", "APERTURE_WORLD_SIZE"},
    {LaunchedBy::mpirun, "mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {LaunchedBy::torchrun, "torchrun", "RANK", "WORLD_SIZE"},
};

}  // namespace

bool has_launcher_variables(LaunchedBy launcher, const env::Lookup& env) {
  for (const Mark& mark : kMarks)
    if (mark.launcher == launcher) return env(mark.rank_variable) != nullptr || env(mark.size_variable) != nullptr;
  return false;
}

LaunchedBy detect_launched_by(const env::Lookup& env) {
  for (const Mark& mark : kMarks)
    if (has_launcher_variables(mark.launcher, env)) return mark.launcher;
  return LaunchedBy::single;
}

std::string_view launched_by_name(LaunchedBy launcher) {
  for (const Mark& mark : kMarks)
    if (mark.launcher == launcher) return mark.name;
  return "single";
}

LaunchedBy launched_by(const Team& team) {
  for (const Mark& mark : kMarks)
    if (mark.name == team.launched_by()) return mark.launcher;
  return LaunchedBy::single;
}

}  // namespace aperture::detail
