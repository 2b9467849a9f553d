// Malformed environments give errors naming the variable, never a job of the wrong shape.
#include "bootstrap/env.h"
#include "bootstrap/wire.h"

#include <gtest/gtest.h>

#include <aperture/error.h>

#include <map>
#include <string>

#include "../common/error_of.h"

namespace {

using namespace aperture::detail;

EnvLookup fake(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

using test::error_of;

TEST(Env, NothingSetMeansNoLauncher) {
  EXPECT_FALSE(read_launch_env(fake({})));
  EXPECT_FALSE(read_mpi_env(fake({})));
  EXPECT_FALSE(read_torchrun_env(fake({})));
}

TEST(Env, LauncherVariables) {
  const auto env = read_launch_env(fake(
      {{"APERTURE_RANK", "3"}, {"APERTURE_WORLD_SIZE", "8"}, {"APERTURE_HUB", "unix:@x"}, {"APERTURE_JOB_TOKEN", "t"}}));
  ASSERT_TRUE(env);
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->hub, "unix:@x");
  EXPECT_EQ(env->token, "t");
  EXPECT_NE(error_of([] { read_launch_env(fake({{"APERTURE_RANK", "0"}, {"APERTURE_WORLD_SIZE", "2"}})); })
                .find("APERTURE_HUB"),
            std::string::npos);
}

TEST(Env, TorchrunVariables) {
  const auto env = read_torchrun_env(fake({{"RANK", "1"},
                                           {"WORLD_SIZE", "4"},
                                           {"LOCAL_RANK", "1"},
                                           {"MASTER_ADDR", "127.0.0.1"},
                                           {"MASTER_PORT", "29500"}}));
  ASSERT_TRUE(env);
  EXPECT_EQ(env->rank, 1);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->master_addr, "127.0.0.1");
  EXPECT_EQ(env->master_port, 29500);
}

struct BadCase {
  std::map<std::string, std::string> vars;
  std::string must_mention;
};

TEST(Env, MalformedValuesNameTheVariable) {
  const std::map<std::string, std::string> good{
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "localhost"}, {"MASTER_PORT", "29500"}};
  auto with = [&](std::string key, std::string value) {
    auto vars = good;
    if (value.empty()) vars.erase(key);
    else vars[key] = value;
    return vars;
  };
  const BadCase cases[] = {
      {with("RANK", "abc"), "RANK='abc' is not an integer"},
      {with("RANK", "1x"), "RANK='1x' is not an integer"},
      {with("RANK", "-1"), "RANK=-1 is out of range"},
      {with("WORLD_SIZE", "0"), "WORLD_SIZE=0 is out of range"},
      {with("RANK", "2"), "RANK=2 is not below WORLD_SIZE=2"},
      {with("RANK", "99999999999999999999"), "not an integer"},
      {with("MASTER_PORT", "70000"), "MASTER_PORT=70000 is out of range"},
      {with("MASTER_PORT", "http"), "MASTER_PORT='http'"},
      {with("MASTER_ADDR", ""), "MASTER_ADDR"},
      {with("WORLD_SIZE", ""), "RANK is set but WORLD_SIZE is not"},
      {with("LOCAL_RANK", "5"), "LOCAL_RANK=5 is out of range"},
  };
  for (const auto& c : cases) {
    const std::string message = error_of([&] { read_torchrun_env(fake(c.vars)); });
    EXPECT_NE(message.find(c.must_mention), std::string::npos) << "got: " << message;
  }
  EXPECT_NE(error_of([] { read_mpi_env(fake({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}})); })
                .find("not below"),
            std::string::npos);
}

TEST(Wire, HelloValidation) {
  wire::Hello hello;
  hello.rank = 1;
  hello.world_size = 4;
  wire::set_field(hello.token, "secret");
  EXPECT_EQ(wire::validate_hello(hello, 4, "secret"), "");
  EXPECT_NE(wire::validate_hello(hello, 4, "other").find("wrong job token"), std::string::npos);
  EXPECT_NE(wire::validate_hello(hello, 2, "secret").find("believes the world has 4"), std::string::npos);
  hello.rank = 7;
  EXPECT_NE(wire::validate_hello(hello, 4, "secret").find("outside"), std::string::npos);
  hello.rank = 1;
  hello.magic = 0;
  EXPECT_NE(wire::validate_hello(hello, 4, "secret").find("magic"), std::string::npos);
  hello.magic = wire::kMagic;
  hello.version = 99;
  EXPECT_NE(wire::validate_hello(hello, 4, "secret").find("version"), std::string::npos);
}

TEST(Wire, RequestValidation) {
  wire::Request request;
  request.op = wire::Op::broadcast;
  request.root = 4;
  EXPECT_NE(wire::validate_request(request, 4), "");
  request.root = 3;
  EXPECT_EQ(wire::validate_request(request, 4), "");
  request.op = static_cast<wire::Op>(77);
  EXPECT_NE(wire::validate_request(request, 4).find("unknown operation"), std::string::npos);
  request.op = wire::Op::allgather;
  request.bytes = 8;
  request.payload_bytes = 4;
  EXPECT_NE(wire::validate_request(request, 4), "");
  request.bytes = request.payload_bytes = wire::kMaxPayload + 1;
  EXPECT_NE(wire::validate_request(request, 4).find("exceeds"), std::string::npos);
}

}  // namespace
