// aperture::Error's code, failed call and detail, and the code of every refusal a CPU can reach:
// bad arguments, timeouts, lost peers, mismatches, unavailable providers, full heaps.
#include <aperture/aperture.h>
#include <aperture/error.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "../common/env_override.h"
#include "../common/error_of.h"
#include "../common/provider_status.h"
#include "bootstrap/launcher_variables.h"
#include "bootstrap/wire_status.h"
#include "common/call_failure.h"

namespace {

using aperture::Error;
using aperture::ErrorCode;
using test::code_of;
using test::EnvOverride;

TEST(Error, KeepsTheMessageAndAddsCodeCallAndDetail) {
  const Error e(ErrorCode::system, "cudaMalloc(&p, 8) failed: out of luck", "cudaMalloc");
  EXPECT_STREQ(e.what(), "aperture: cudaMalloc(&p, 8) failed: out of luck");
  EXPECT_EQ(e.code(), ErrorCode::system);
  EXPECT_EQ(e.call(), "cudaMalloc");
  EXPECT_EQ(e.detail(), "cudaMalloc(&p, 8) failed: out of luck");
  // Still a std::runtime_error, and copying it cannot throw (it may be copied while unwinding).
  EXPECT_TRUE((std::is_base_of_v<std::runtime_error, Error>));
  EXPECT_TRUE(std::is_nothrow_copy_constructible_v<Error>);
  const Error copy = e;
  EXPECT_EQ(copy.call(), "cudaMalloc");
}

TEST(Error, TheMessageOnlyConstructorIsUnclassified) {
  // Deprecated (error.h), and still kept working for one release.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  const Error e("something odd");
#pragma GCC diagnostic pop
  EXPECT_STREQ(e.what(), "aperture: something odd");
  EXPECT_EQ(e.code(), ErrorCode::internal);
  EXPECT_EQ(e.call(), "");
  EXPECT_EQ(e.detail(), "something odd");
}

TEST(Error, CodesHaveTheirNames) {
  EXPECT_EQ(aperture::to_string(ErrorCode::invalid_argument), "invalid_argument");
  EXPECT_EQ(aperture::to_string(ErrorCode::timeout), "timeout");
  EXPECT_EQ(aperture::to_string(ErrorCode::peer_lost), "peer_lost");
  EXPECT_EQ(aperture::to_string(ErrorCode::mismatch), "mismatch");
  EXPECT_EQ(aperture::to_string(ErrorCode::unavailable), "unavailable");
  EXPECT_EQ(aperture::to_string(ErrorCode::out_of_memory), "out_of_memory");
  EXPECT_EQ(aperture::to_string(ErrorCode::system), "system");
  EXPECT_EQ(aperture::to_string(ErrorCode::internal), "internal");
}

// The hub sends a failure's code as the reply status; an unknown status reads as internal.
TEST(Error, CodesSurviveTheWire) {
  using namespace aperture::detail;
  for (ErrorCode code : {ErrorCode::invalid_argument, ErrorCode::timeout, ErrorCode::peer_lost, ErrorCode::mismatch,
                         ErrorCode::unavailable, ErrorCode::out_of_memory, ErrorCode::system, ErrorCode::internal}) {
    EXPECT_NE(wire::status_of(code), 0);
    EXPECT_EQ(wire::code_of_status(wire::status_of(code)), code);
  }
  EXPECT_EQ(wire::code_of_status(1000), ErrorCode::internal);
  EXPECT_EQ(wire::code_of_status(-1), ErrorCode::internal);
}

TEST(CallFailure, NamesTheFunctionAndTheSourceLine) {
  using namespace aperture::detail;
  EXPECT_EQ(called_function("cudaMalloc(&p, bytes)"), "cudaMalloc");
  EXPECT_EQ(called_function("cu.cuMemMap(va, n, 0, h, 0)"), "cuMemMap");
  EXPECT_EQ(called_function("MPI_Bcast of the bootstrap message length"), "MPI_Bcast");
  EXPECT_EQ(short_source_path("/somewhere/tree/src/providers/x.cpp"), "src/providers/x.cpp");
  EXPECT_EQ(short_source_path("/somewhere/tree/tests/gpu/t.cu"), "tests/gpu/t.cu");
  EXPECT_EQ(call_failure_text("ncclMemAlloc(&p, 8)", "unhandled cuda error"),
            "ncclMemAlloc(&p, 8) failed: unhandled cuda error");
  EXPECT_EQ(call_failure_text("f(x)", "E_BAD (bad)", "/a/src/b.cpp", 12), "f(x) failed: E_BAD (bad) at src/b.cpp:12");
  try {
    throw_call_failure(ErrorCode::out_of_memory, "cudaMalloc(&p, n)", "cudaMalloc(&p, n) failed: oom", "cuda-ipc heap");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::out_of_memory);
    EXPECT_EQ(e.call(), "cudaMalloc");
    EXPECT_EQ(e.detail(), "cuda-ipc heap: cudaMalloc(&p, n) failed: oom");
  }
}

TEST(ErrorCodes, MalformedEnvironmentIsAnInvalidArgument) {
  using namespace aperture::detail;
  const auto env = [](std::map<std::string, std::string> vars) -> EnvLookup {
    return [vars = std::move(vars)](const char* name) -> const char* {
      const auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  };
  EXPECT_EQ(code_of([&] { read_launch_env(env({{"APERTURE_RANK", "0"}})); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] {
              read_launch_env(env({{"APERTURE_RANK", "0"}, {"APERTURE_WORLD_SIZE", "2"}}));
            }),
            ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] {
              read_mpi_env(env({{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
            }),
            ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] {
              read_torchrun_env(env({{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
            }),
            ErrorCode::invalid_argument);
  {
    EnvOverride timeout("APERTURE_TIMEOUT", "abc");
    EXPECT_EQ(code_of([] { aperture::detail::timeout_seconds(); }), ErrorCode::invalid_argument);
  }
  {
    EnvOverride heap("APERTURE_HEAP_SIZE", "lots");
    auto team = aperture::Team::single();
    EXPECT_EQ(code_of([&] { aperture::make_provider("shm", team); }), ErrorCode::invalid_argument);
  }
}

TEST(ErrorCodes, HostWaitTimesOutOrHearsThatAPeerIsLost) {
  EnvOverride timeout("APERTURE_TIMEOUT", "0.05");
  std::uint64_t flag = 1;
  try {
    aperture::wait_until_ge(&flag, 2);
    ADD_FAILURE() << "wait_until_ge should have timed out";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::timeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
  }
  // A job watch that reports a failed job ends the wait at once, as a lost peer: long before a
  // generous timeout (the watch is asked once the wait sleeps, which a loaded machine delays).
  EnvOverride generous("APERTURE_TIMEOUT", "30");
  using aperture::detail::job_watch;
  const auto previous = job_watch.exchange(+[] { return std::string("rank 1 exited"); });
  try {
    aperture::wait_until_ge(&flag, 2);
    ADD_FAILURE() << "wait_until_ge should have given up";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::peer_lost) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1 exited"), std::string::npos) << e.what();
  }
  job_watch.store(previous);
}

TEST(ErrorCodes, TeamRefusesBadArguments) {
  auto team = aperture::Team::single();
  int value = 0;
  EXPECT_EQ(code_of([&] { team.broadcast(&value, sizeof value, 1); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { team.broadcast(nullptr, 4, 0); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { team.allgather(nullptr, &value, 4); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] {
              team.check_same("many", {{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}, {"e", 1}, {"f", 1}, {"g", 1},
                                       {"h", 1}, {"i", 1}, {"j", 1}, {"k", 1}, {"l", 1}, {"m", 1}});
            }),
            ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] {  // twelve are the most it compares (the Communicator's options are nine)
              team.check_same("twelve", {{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}, {"e", 1}, {"f", 1}, {"g", 1},
                                         {"h", 1}, {"i", 1}, {"j", 1}, {"k", 1}, {"l", 1}});
            }),
            std::nullopt);
}

TEST(ErrorCodes, ProvidersSayWhatKindOfRefusalItIs) {
  auto team = aperture::Team::single();
  EXPECT_EQ(code_of([&] { aperture::make_provider("no-such-provider", team); }), ErrorCode::invalid_argument);
  // A provider aperture knows but that cannot run here (no GPU, no mpirun, not built).
  for (const auto& status : aperture::provider_statuses()) {
    if (status.available) continue;
    EXPECT_EQ(code_of([&] { aperture::make_provider(status.name, team); }), ErrorCode::unavailable) << status.name;
  }

  EnvOverride heap("APERTURE_HEAP_SIZE", "1M");
  auto shm = aperture::make_provider("shm", team);
  EXPECT_EQ(code_of([&] { shm->allocate(64, 3); }), ErrorCode::invalid_argument);                 // alignment
  EXPECT_EQ(code_of([&] { shm->allocate(std::size_t{1} << 50); }), ErrorCode::invalid_argument);  // absurd size
  EXPECT_EQ(code_of([&] { shm->allocate(std::size_t{4} << 20); }), ErrorCode::out_of_memory);     // heap full
  aperture::Allocation a = shm->allocate(256);
  aperture::Allocation copy = a;
  shm->free(a);
  EXPECT_EQ(code_of([&] { shm->free(copy); }), ErrorCode::invalid_argument);  // freed twice
  int outside = 0;
  EXPECT_EQ(code_of([&] { shm->symmetric_address_map(&outside, sizeof outside); }), ErrorCode::invalid_argument);
}

TEST(ErrorCodes, CheckedTranslateRefusalsAreInvalidArguments) {
  auto team = aperture::Team::single();
  EnvOverride heap("APERTURE_HEAP_SIZE", "1M");
  auto shm = aperture::make_provider("shm", team);
  aperture::Allocation a = shm->allocate(64);
  auto* p = static_cast<std::uint64_t*>(a.ptr);
  EXPECT_EQ(code_of([&] { aperture::checked_translate(a.map, p, 1); }), ErrorCode::invalid_argument);  // no rank 1
  EXPECT_EQ(code_of([&] { aperture::checked_translate(a.map, p + 8, 0, 1); }),
            ErrorCode::invalid_argument);  // past end
  aperture::Allocation copy = a;
  shm->free(a);
  EXPECT_EQ(code_of([&] { aperture::checked_translate(copy.map, p, 0); }), ErrorCode::invalid_argument);  // freed
}

}  // namespace
