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
    {LaunchedBy::mpirun, kMpirunName, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {LaunchedBy::torchrun, "torchrun", "RANK", "WORLD_SIZE"},
    {LaunchedBy::srun, kSrunName, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS"},
};

bool srun_step_of_many(const env::Lookup& env) {
  // A batch script's shell has SLURM_PROCID and no step. A malformed count marks it too, so that
  // reading the variables reports it.
  const char* tasks = env("SLURM_STEP_NUM_TASKS");
  return tasks != nullptr && std::string_view(tasks) != "1";
}

}  // namespace

bool has_launcher_variables(LaunchedBy launcher, const env::Lookup& env) {
  if (launcher == LaunchedBy::srun) return srun_step_of_many(env);
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

bool mpi_knows_the_ranks(const env::Lookup& env) {
  if (has_launcher_variables(LaunchedBy::mpirun, env)) return true;
  return detect_launched_by(env) == LaunchedBy::srun && env("PMIX_RANK") != nullptr;
}

}  // namespace aperture::detail
