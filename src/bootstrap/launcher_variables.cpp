#include "bootstrap/launcher_variables.h"

#include "aperture/error.h"
#include "bootstrap/wire.h"
#include "common/format.h"

namespace aperture::detail {

namespace {

// Rank and size variables come in pairs: both or neither.
std::optional<std::pair<int, int>> read_rank_and_size(const EnvLookup& env, const char* rank_name,
                                                      const char* size_name) {
  const char* rank_text = env(rank_name);
  const char* size_text = env(size_name);
  if (rank_text == nullptr && size_text == nullptr) return std::nullopt;
  if (rank_text == nullptr || size_text == nullptr)
    throw Error(ErrorCode::invalid_argument,
                detail::format("{} is set but {} is not; a launcher must set both", rank_text ? rank_name : size_name,
                               rank_text ? size_name : rank_name));
  const int size = parse_int_variable(size_name, size_text, 1, wire::kMaxWorldSize);
  const int rank = parse_int_variable(rank_name, rank_text, 0, wire::kMaxWorldSize - 1);
  if (rank >= size)
    throw Error(ErrorCode::invalid_argument, detail::format("{}={} is not below {}={}; ranks are numbered 0..{}",
                                                            rank_name, rank, size_name, size, size - 1));
  return std::pair{rank, size};
}

}  // namespace

std::optional<LaunchEnv> read_launch_env(const EnvLookup& env) {
  const auto shape = read_rank_and_size(env, "APERTURE_RANK", "APERTURE_WORLD_SIZE");
  if (!shape) return std::nullopt;
  LaunchEnv launch;
  launch.rank = shape->first;
  launch.world_size = shape->second;
  const char* hub = env("APERTURE_HUB");
  if (hub == nullptr || *hub == '\0')
    throw Error(ErrorCode::invalid_argument,
                "APERTURE_RANK is set but APERTURE_HUB is not; start ranks with `aperture launch -n N -- program`");
  launch.hub = hub;
  if (const char* token = env("APERTURE_JOB_TOKEN")) launch.token = token;
  return launch;
}

std::optional<MpiEnv> read_mpi_env(const EnvLookup& env) {
  const auto shape = read_rank_and_size(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
  if (!shape) return std::nullopt;
  return MpiEnv{shape->first, shape->second};
}

std::optional<TorchrunEnv> read_torchrun_env(const EnvLookup& env) {
  const auto shape = read_rank_and_size(env, "RANK", "WORLD_SIZE");
  if (!shape) return std::nullopt;
  TorchrunEnv torchrun;
  torchrun.rank = shape->first;
  torchrun.world_size = shape->second;
  if (const char* local = env("LOCAL_RANK"))
    torchrun.local_rank = parse_int_variable("LOCAL_RANK", local, 0, torchrun.world_size - 1);
  const char* addr = env("MASTER_ADDR");
  const char* port = env("MASTER_PORT");
  if (torchrun.world_size > 1 && (addr == nullptr || *addr == '\0' || port == nullptr))
    throw Error(
        ErrorCode::invalid_argument,
        detail::format("RANK and WORLD_SIZE={} are set but MASTER_ADDR/MASTER_PORT are not; torchrun sets all four "
                       "(set them to rank 0's address and a free port)",
                       torchrun.world_size));
  if (addr != nullptr) torchrun.master_addr = addr;
  if (port != nullptr) torchrun.master_port = parse_int_variable("MASTER_PORT", port, 1, 65535);
  return torchrun;
}

std::optional<SrunEnv> read_srun_env(const EnvLookup& env) {
  // SLURM_PROCID alone is a batch script's (or salloc's) shell, not a task of a step.
  if (env("SLURM_STEP_NUM_TASKS") == nullptr) return std::nullopt;
  const auto shape = read_rank_and_size(env, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS");
  SrunEnv srun;
  srun.rank = shape->first;
  srun.world_size = shape->second;
  const char* nodes = env("SLURM_STEP_NODELIST");
  if (srun.world_size > 1 && (nodes == nullptr || *nodes == '\0'))
    throw Error(ErrorCode::invalid_argument,
                detail::format("SLURM_STEP_NUM_TASKS={} is set but SLURM_STEP_NODELIST is not; srun sets both (is this "
                               "process a task of an srun step?)",
                               srun.world_size));
  if (nodes != nullptr && *nodes != '\0') srun.first_node = first_host_of("SLURM_STEP_NODELIST", nodes);
  const auto text = [&](const char* name) {
    const char* value = env(name);
    return std::string(value == nullptr ? "" : value);
  };
  srun.this_node = text("SLURMD_NODENAME");
  srun.job_id = text("SLURM_JOB_ID");
  srun.step_id = text("SLURM_STEP_ID");
  srun.cluster = text("SLURM_CLUSTER_NAME");
  srun.pmix = env("PMIX_RANK") != nullptr;
  return srun;
}

std::string first_host_of(const char* variable, std::string_view host_list) {
  const auto malformed = [&](std::string_view why) {
    return Error(ErrorCode::invalid_argument,
                 detail::format("{}='{}' is not a Slurm host list ({}); it should read like 'node[01-04,07],login1'",
                                variable, host_list, why));
  };
  std::string host;
  for (std::size_t i = 0; i < host_list.size() && host_list[i] != ',';) {
    const char c = host_list[i];
    if (c == ']') throw malformed("a ']' without its '['");
    if (c != '[') {
      host += c;
      ++i;
      continue;
    }
    // A range set, "[01-04,07]": its first number as written stands for the whole set.
    const std::size_t close = host_list.find(']', i);
    if (close == std::string_view::npos) throw malformed("a '[' without its ']'");
    const std::string_view set = host_list.substr(i + 1, close - i - 1);
    const std::size_t end = set.find_first_of("-,");
    const std::string_view first = set.substr(0, end);
    if (first.empty() || first.find_first_not_of("0123456789") != std::string_view::npos)
      throw malformed("a bracketed range that does not start with a number");
    if (set.find('[') != std::string_view::npos) throw malformed("brackets inside brackets");
    host += first;
    i = close + 1;
  }
  if (host.empty()) throw malformed("no host name before the first ','");
  return host;
}

}  // namespace aperture::detail
