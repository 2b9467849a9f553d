// fuzz_env: the environment parsers behind Team::from_env(), through their lookup function.
//
// Input: lines; line i is the value of the i-th variable below ("-" or a missing line: unset).
// Every reader either returns a shape that is valid (0 <= rank < world size <= the cap, a hub
// address, a port in 1..65535, ...) or throws aperture::Error; anything else (another
// exception, a crash, a sanitizer report) is a bug. Also APERTURE_TIMEOUT's parser.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "aperture/detail/host_wait.h"
#include "aperture/error.h"
#include "bootstrap/env.h"
#include "bootstrap/wire.h"
#include "fuzz_check.h"

using namespace aperture::detail;

namespace {

const char* const kNames[] = {"APERTURE_RANK", "APERTURE_WORLD_SIZE", "APERTURE_HUB", "APERTURE_JOB_TOKEN",
                              "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "RANK", "WORLD_SIZE",
                              "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "APERTURE_TIMEOUT"};

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
