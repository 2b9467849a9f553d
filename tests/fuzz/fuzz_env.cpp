// fuzz_env: the environment parsers behind Team::from_env(), through their lookup function.
//
// Input: lines; line i is the value of the i-th variable below ("-" or a missing line: unset).
// Every reader either returns a shape that is valid (0 <= rank < world size <= the cap, a hub
// address, a port in 1..65535, ...) or throws aperture::Error; anything else (another
// exception, a crash, a sanitizer report) is a bug. Also APERTURE_TIMEOUT's parser.
// The other direction too: an environment as each launcher writes it (decimal rank and size in
// range, a hub address, a port that leaves room for the hub's) is always accepted, and read back
// exactly; so is a decimal integer inside the parser's bounds. srun's variables come last, so
// the seeds written before them keep their meaning.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "aperture/detail/host_wait.h"
#include "aperture/error.h"
#include "bootstrap/launcher_variables.h"
#include "bootstrap/wire.h"
#include "fuzz_check.h"

using namespace aperture::detail;

namespace {

const char* const kNames[] = {"APERTURE_RANK", "APERTURE_WORLD_SIZE", "APERTURE_HUB", "APERTURE_JOB_TOKEN",
                              "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "RANK", "WORLD_SIZE",
                              "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "APERTURE_TIMEOUT",
                              "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST"};

template <class Call>
void expect_value_or_error(Call&& call) {
  try {
    call();
  } catch (const aperture::Error&) {
  }
  // Any other exception escapes: libFuzzer reports it as a crash.
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::map<std::string, std::string> vars;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::size_t at = 0;
  for (const char* name : kNames) {
    if (at > text.size()) break;
    const auto end = text.find('\n', at);
    const std::string value = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? text.size() + 1 : end + 1;
    if (value != "-") vars[name] = value;
  }
  const EnvLookup env = [&vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };

  expect_value_or_error([&] {
    if (const auto launch = read_launch_env(env)) {
      FUZZ_CHECK(launch->world_size >= 1 && launch->world_size <= wire::kMaxWorldSize, "world size %d",
                 launch->world_size);
      FUZZ_CHECK(launch->rank >= 0 && launch->rank < launch->world_size, "rank %d of %d", launch->rank,
                 launch->world_size);
      FUZZ_CHECK(!launch->hub.empty(), "accepted an empty APERTURE_HUB");
    }
  });
  expect_value_or_error([&] {
    if (const auto mpi = read_mpi_env(env)) {
      FUZZ_CHECK(mpi->world_size >= 1 && mpi->world_size <= wire::kMaxWorldSize, "world size %d", mpi->world_size);
      FUZZ_CHECK(mpi->rank >= 0 && mpi->rank < mpi->world_size, "rank %d of %d", mpi->rank, mpi->world_size);
    }
  });
  expect_value_or_error([&] {
    if (const auto torchrun = read_torchrun_env(env)) {
      FUZZ_CHECK(torchrun->world_size >= 1 && torchrun->world_size <= wire::kMaxWorldSize, "world size %d",
                 torchrun->world_size);
      FUZZ_CHECK(torchrun->rank >= 0 && torchrun->rank < torchrun->world_size, "rank %d of %d", torchrun->rank,
                 torchrun->world_size);
      FUZZ_CHECK(torchrun->local_rank == -1 || (torchrun->local_rank >= 0 && torchrun->local_rank < torchrun->world_size),
                 "local rank %d", torchrun->local_rank);
      if (torchrun->world_size > 1) {
        FUZZ_CHECK(!torchrun->master_addr.empty(), "a multi-rank job without MASTER_ADDR");
        FUZZ_CHECK(torchrun->master_port >= 1 && torchrun->master_port <= 65535, "port %d", torchrun->master_port);
      }
    }
  });
  expect_value_or_error([&] {
    if (const auto srun = read_srun_env(env)) {
      FUZZ_CHECK(srun->world_size >= 1 && srun->world_size <= wire::kMaxWorldSize, "world size %d", srun->world_size);
      FUZZ_CHECK(srun->rank >= 0 && srun->rank < srun->world_size, "rank %d of %d", srun->rank, srun->world_size);
      if (srun->world_size > 1) FUZZ_CHECK(!srun->first_node.empty(), "a multi-task step without a first node");
      FUZZ_CHECK(srun->first_node.find_first_of("[],") == std::string::npos, "first node '%s' is a list",
                 srun->first_node.c_str());
    }
  });
  // The integer parser alone, with the bounds the readers use and bounds from the input.
  if (const auto it = vars.find("RANK"); it != vars.end()) {
    const long min = size > 0 ? static_cast<long>(static_cast<std::int8_t>(data[0])) : 0;
    const long max = min + (size > 1 ? data[size - 1] : 0);
    expect_value_or_error([&] {
      const int value = parse_int_variable("RANK", it->second.c_str(), min, max);
      FUZZ_CHECK(value >= min && value <= max, "%d outside %ld..%ld", value, min, max);
      FUZZ_CHECK(std::strtol(it->second.c_str(), nullptr, 10) == value, "parsed '%s' as %d", it->second.c_str(), value);
    });
  }
  // The valid direction: a rank and a world size from the input, written as the launchers write them.
  {
    const int world = 1 + static_cast<int>((size > 0 ? data[0] : 0) | (size > 1 ? data[1] << 8 : 0)) % wire::kMaxWorldSize;
    const int rank = static_cast<int>((size > 2 ? data[2] : 0) | (size > 3 ? data[3] << 8 : 0)) % world;
    const int port = 1 + static_cast<int>((size > 4 ? data[4] : 0) | (size > 5 ? data[5] << 8 : 0)) % 65534;
    const std::map<std::string, std::string> launched = {{"APERTURE_RANK", std::to_string(rank)},
                                                         {"APERTURE_WORLD_SIZE", std::to_string(world)},
                                                         {"APERTURE_HUB", "unix:@aperture-fuzz"}};
    const std::map<std::string, std::string> torchrun = {{"RANK", std::to_string(rank)},
                                                         {"WORLD_SIZE", std::to_string(world)},
                                                         {"LOCAL_RANK", std::to_string(rank)},
                                                         {"MASTER_ADDR", "127.0.0.1"},
                                                         {"MASTER_PORT", std::to_string(port)}};
    const std::map<std::string, std::string> mpi = {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
                                                    {"OMPI_COMM_WORLD_SIZE", std::to_string(world)}};
    const std::map<std::string, std::string> srun = {
        {"SLURM_PROCID", std::to_string(rank)},
        {"SLURM_STEP_NUM_TASKS", std::to_string(world)},
        {"SLURM_STEP_NODELIST", "gpu[0" + std::to_string(port) + "-0" + std::to_string(port + 1) + "],login1"}};
    auto lookup = [](const std::map<std::string, std::string>& vars) {
      return EnvLookup([&vars](const char* name) -> const char* {
        const auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      });
    };
    try {
      const auto l = read_launch_env(lookup(launched));
      FUZZ_CHECK(l && l->rank == rank && l->world_size == world, "misread a launcher environment of rank %d of %d",
                 rank, world);
      const auto t = read_torchrun_env(lookup(torchrun));
      FUZZ_CHECK(t && t->rank == rank && t->world_size == world && t->master_port == port,
                 "misread a torchrun environment of rank %d of %d, port %d", rank, world, port);
      const auto m = read_mpi_env(lookup(mpi));
      FUZZ_CHECK(m && m->rank == rank && m->world_size == world, "misread an mpirun environment of rank %d of %d",
                 rank, world);
      const auto s = read_srun_env(lookup(srun));
      FUZZ_CHECK(s && s->rank == rank && s->world_size == world && s->first_node == "gpu0" + std::to_string(port),
                 "misread an srun environment of task %d of %d, first node gpu0%d", rank, world, port);
      const long min = -1000, max = 1000;
      const long value = static_cast<long>((size > 6 ? data[6] : 0) | (size > 7 ? data[7] << 8 : 0)) % 2001 - 1000;
      FUZZ_CHECK(parse_int_variable("RANK", std::to_string(value).c_str(), min, max) == value,
                 "misread %ld inside %ld..%ld", value, min, max);
    } catch (const aperture::Error& e) {
      FUZZ_CHECK(false, "refused a valid environment (rank %d of %d, port %d): %s", rank, world, port, e.what());
    }
  }
  // APERTURE_TIMEOUT: the process environment is the only way in (single-threaded here).
  if (const auto it = vars.find("APERTURE_TIMEOUT"); it != vars.end()) {
    ::setenv("APERTURE_TIMEOUT", it->second.c_str(), 1);
    expect_value_or_error([&] {
      const double seconds = timeout_seconds();
      FUZZ_CHECK(seconds > 0 && seconds <= 1e7, "timeout %g s", seconds);
    });
    ::unsetenv("APERTURE_TIMEOUT");
  }
  return 0;
}
