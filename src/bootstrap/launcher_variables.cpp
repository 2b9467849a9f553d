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

}  // namespace aperture::detail
