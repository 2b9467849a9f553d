// Malformed environments give errors naming the variable, never a job of the wrong shape.
#include "bootstrap/launcher_variables.h"
#include "bootstrap/launched_by.h"
#include "bootstrap/wire.h"
#include "common/env.h"

#include <gtest/gtest.h>

#include <aperture/error.h>
#include <aperture/team.h>

#include <array>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

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
  EXPECT_FALSE(read_srun_env(fake({})));
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
    EXPECT_EQ(test::code_of([&] { read_torchrun_env(fake(c.vars)); }), aperture::ErrorCode::invalid_argument)
        << message;
  }
  EXPECT_NE(error_of([] { read_mpi_env(fake({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}})); })
                .find("not below"),
            std::string::npos);
}

TEST(Wire, HelloValidation) {
  wire::Hello hello;
  hello.rank = 1;
  hello.world_size = 4;
  EXPECT_EQ(wire::validate_hello(hello, 4), "");
  EXPECT_NE(wire::validate_hello(hello, 2).find("believes the world has 4"), std::string::npos);
  hello.rank = 7;
  EXPECT_NE(wire::validate_hello(hello, 4).find("outside"), std::string::npos);
  hello.rank = 1;
  hello.magic = 0;
  EXPECT_NE(wire::validate_hello(hello, 4).find("magic"), std::string::npos);
  hello.magic = wire::kMagic;
  hello.version = 99;
  EXPECT_NE(wire::validate_hello(hello, 4).find("version"), std::string::npos);
}

// The rank's proof: accepted with the job's token, refused with any other, or for other
// challenges, or for another rank.
TEST(Wire, RankProofValidation) {
  using aperture::detail::Prover;
  wire::Hello hello;
  hello.rank = 1;
  hello.world_size = 4;
  hello.challenge = aperture::detail::make_challenge();
  const auto hub_challenge = aperture::detail::make_challenge();
  wire::RankProof proof;
  proof.proof = job_proof(Prover::rank, "secret", hello.challenge, hub_challenge, 1, 4);
  EXPECT_EQ(wire::validate_rank_proof(proof, hello, hub_challenge, "secret"), "");
  EXPECT_NE(wire::validate_rank_proof(proof, hello, hub_challenge, "other").find("wrong job token"), std::string::npos);
  EXPECT_NE(wire::validate_rank_proof(proof, hello, aperture::detail::make_challenge(), "secret"), "");
  wire::Hello other_rank = hello;
  other_rank.rank = 2;
  EXPECT_NE(wire::validate_rank_proof(proof, other_rank, hub_challenge, "secret"), "");
  // The hub's answer to the same challenges is not a rank's: the directions cannot be swapped.
  proof.proof = job_proof(Prover::hub, "secret", hello.challenge, hub_challenge, 1, 4);
  EXPECT_NE(wire::validate_rank_proof(proof, hello, hub_challenge, "secret"), "");
  proof.proof = job_proof(Prover::rank, "secret", hello.challenge, hub_challenge, 1, 4);
  proof.magic = 0;
  EXPECT_NE(wire::validate_rank_proof(proof, hello, hub_challenge, "secret").find("magic"), std::string::npos);
}

std::string hex(const std::array<std::uint8_t, 32>& digest) {
  constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (std::uint8_t b : digest) {
    text += kDigits[b >> 4];
    text += kDigits[b & 15];
  }
  return text;
}

// The published test vectors: FIPS 180-4's examples for SHA-256, RFC 4231's for HMAC-SHA-256
// (cases 1, 2 and 6: a short key, a key shorter than the data, a key longer than a block).
TEST(JobProof, Sha256AndHmacMatchThePublishedVectors) {
  using aperture::detail::hmac_sha256;
  using aperture::detail::sha256;
  EXPECT_EQ(hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hex(hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
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

// --- the table of variables (common/env.h) -----------------------------------------------------

TEST(EnvRegistry, EveryVariableIsDocumentedOnce) {
  std::set<std::string_view> names;
  for (const auto& v : aperture::env::variables()) {
    EXPECT_TRUE(v.name.starts_with("APERTURE_")) << v.name;
    EXPECT_TRUE(names.insert(v.name).second) << v.name << " is listed twice";
    EXPECT_FALSE(v.type.empty() || v.default_value.empty() || v.range.empty() || v.doc.empty()) << v.name;
    EXPECT_EQ(v.doc.find('|'), std::string_view::npos) << v.name << ": a '|' would break README's table";
  }
  for (const char* expected :
       {"APERTURE_TIMEOUT", "APERTURE_HEAP_SIZE", "APERTURE_GPU_HEAP_SIZE", "APERTURE_VMM_RESERVE", "APERTURE_RANK",
        "APERTURE_WORLD_SIZE", "APERTURE_LOCAL_RANK", "APERTURE_LOCAL_SIZE", "APERTURE_HUB", "APERTURE_JOB_TOKEN",
        "APERTURE_NODE", "APERTURE_NODES", "APERTURE_HUB_HOST", "APERTURE_NODE_EXEC",
        "APERTURE_MASTER_PORT", "APERTURE_COLLECTIVES_SPINS",
        "APERTURE_COLLECTIVES_PDL", "APERTURE_COLLECTIVES_BETWEEN_NODES"})
    EXPECT_EQ(names.count(expected), 1u) << expected << " is read by aperture but not in the table";
}

// `aperture launch --mpi` clears exactly these from the ranks' environment.
TEST(EnvRegistry, LauncherVariablesAreTheOnesTheLauncherSets) {
  EXPECT_EQ(aperture::env::launcher_variables(),
            (std::vector<std::string>{"APERTURE_RANK", "APERTURE_WORLD_SIZE", "APERTURE_LOCAL_RANK",
                                      "APERTURE_LOCAL_SIZE", "APERTURE_HUB", "APERTURE_JOB_TOKEN", "APERTURE_NODE"}));
}

// README.md's table of variables is the registry's, row for row: change one, change both.
TEST(EnvRegistry, ReadmeTableMatchesRegistry) {
  std::ifstream readme(APERTURE_SOURCE_DIR "/README.md");
  ASSERT_TRUE(readme) << "cannot read README.md";
  std::stringstream text;
  text << readme.rdbuf();
  const std::string expected = aperture::env::markdown_table();
  EXPECT_NE(text.str().find(expected), std::string::npos)
      << "README.md's table of environment variables differs from src/common/env.cpp's; it should read:\n"
      << expected;
}

TEST(EnvRegistry, ParsersNameTheVariableAndTheFix) {
  using aperture::ErrorCode;
  using test::code_of;
  namespace env = aperture::env;
  EXPECT_EQ(env::parse_size("APERTURE_HEAP_SIZE", "4G"), std::size_t{4} << 30);
  EXPECT_EQ(env::parse_size("APERTURE_HEAP_SIZE", "512k"), std::size_t{512} << 10);
  EXPECT_EQ(env::parse_size("APERTURE_HEAP_SIZE", "100"), 100u);
  for (const char* bad : {"lots", "0", "-1", "4GB", "17T", ""}) {
    const std::string message = error_of([&] { env::parse_size("APERTURE_HEAP_SIZE", bad); });
    EXPECT_NE(message.find(std::string("APERTURE_HEAP_SIZE='") + bad + "' is not a size"), std::string::npos)
        << message;
    EXPECT_NE(message.find("e.g. 4G"), std::string::npos) << message;
    EXPECT_EQ(code_of([&] { env::parse_size("APERTURE_HEAP_SIZE", bad); }), ErrorCode::invalid_argument);
  }
  EXPECT_EQ(env::parse_int("APERTURE_MASTER_PORT", "29501", 1, 65535), 29501);
  EXPECT_NE(error_of([] { env::parse_int("APERTURE_MASTER_PORT", "0", 1, 65535); })
                .find("APERTURE_MASTER_PORT=0 is out "
                      "of range"),
            std::string::npos);
  EXPECT_TRUE(env::parse_flag("APERTURE_COLLECTIVES_PDL", "1"));
  EXPECT_FALSE(env::parse_flag("APERTURE_COLLECTIVES_PDL", "0"));
  EXPECT_NE(error_of([] { env::parse_flag("APERTURE_COLLECTIVES_PDL", "yes"); }).find("APERTURE_COLLECTIVES_PDL='yes'"),
            std::string::npos);
  EXPECT_EQ(code_of([] { env::parse_flag("APERTURE_COLLECTIVES_PDL", "yes"); }), ErrorCode::invalid_argument);
  EXPECT_EQ(env::parse_between_nodes(nullptr), env::BetweenNodes::automatic);
  EXPECT_EQ(env::parse_between_nodes(""), env::BetweenNodes::automatic);
  EXPECT_EQ(env::parse_between_nodes("auto"), env::BetweenNodes::automatic);
  EXPECT_EQ(env::parse_between_nodes("nccl"), env::BetweenNodes::nccl);
  EXPECT_EQ(env::parse_between_nodes("mpi"), env::BetweenNodes::mpi);
  for (const char* bad : {"NCCL", "ucx", "nccl ", "1"}) {
    const std::string message = error_of([&] { env::parse_between_nodes(bad); });
    EXPECT_NE(message.find(std::string("APERTURE_COLLECTIVES_BETWEEN_NODES='") + bad + "' is not a path"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("auto"), std::string::npos) << message;
    EXPECT_NE(message.find("mpi"), std::string::npos) << message;
    EXPECT_EQ(code_of([&] { env::parse_between_nodes(bad); }), ErrorCode::invalid_argument);
  }
}

TEST(EnvRegistry, ReadersFallBackToTheirDefaults) {
  namespace env = aperture::env;
  const auto none = fake({});
  EXPECT_EQ(env::master_port(none), std::nullopt);
  EXPECT_EQ(env::master_port(fake({{"APERTURE_MASTER_PORT", "29600"}})), 29600);
  EXPECT_EQ(test::code_of([] {
              env::master_port(fake({{"APERTURE_MASTER_PORT", ""}}));
            }),
            aperture::ErrorCode::invalid_argument);
  EXPECT_EQ(env::local_size(none), 0);
  EXPECT_EQ(env::local_size(fake({{"LOCAL_WORLD_SIZE", "4"}})), 4);
  EXPECT_EQ(env::local_size(fake({{"APERTURE_LOCAL_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}})), 2);
  EXPECT_EQ(env::local_size(fake({{"APERTURE_LOCAL_SIZE", "x"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}})), 8);
}

// --- Slurm's srun ------------------------------------------------------------------------------------

// What srun 22.05 set for task 2 of `srun -N2 -n4 --mpi=pmix` (a step's variables, trimmed).
std::map<std::string, std::string> srun_task(std::map<std::string, std::string> changes = {}) {
  std::map<std::string, std::string> vars = {{"SLURM_PROCID", "2"},         {"SLURM_STEP_NUM_TASKS", "4"},
                                             {"SLURM_NTASKS", "4"},         {"SLURM_STEP_NODELIST", "gpu[07-08]"},
                                             {"SLURMD_NODENAME", "gpu08"},  {"SLURM_JOB_ID", "4711"},
                                             {"SLURM_STEP_ID", "0"},        {"SLURM_CLUSTER_NAME", "apsim"},
                                             {"SLURM_LOCALID", "0"},        {"PMIX_RANK", "2"}};
  for (auto& [name, value] : changes) {
    if (value.empty()) vars.erase(name);
    else vars[name] = value;
  }
  return vars;
}

TEST(Env, SrunVariables) {
  const auto env = read_srun_env(fake(srun_task()));
  ASSERT_TRUE(env);
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->first_node, "gpu07");
  EXPECT_EQ(env->this_node, "gpu08");
  EXPECT_EQ(env->job_id, "4711");
  EXPECT_EQ(env->step_id, "0");
  EXPECT_EQ(env->cluster, "apsim");
  EXPECT_TRUE(env->pmix);
  EXPECT_FALSE(read_srun_env(fake(srun_task({{"PMIX_RANK", ""}})))->pmix);
  // A batch script's shell: SLURM_PROCID and SLURM_NTASKS, no step. Not a task of a step.
  EXPECT_FALSE(read_srun_env(fake({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_JOB_ID", "4711"}})));
}

TEST(Env, SrunVariablesMalformed) {
  const struct {
    std::map<std::string, std::string> changes;
    const char* names;
  } cases[] = {
      {{{"SLURM_PROCID", "4"}}, "SLURM_PROCID=4 is not below SLURM_STEP_NUM_TASKS=4"},
      {{{"SLURM_PROCID", ""}}, "SLURM_STEP_NUM_TASKS is set but SLURM_PROCID is not"},
      {{{"SLURM_STEP_NUM_TASKS", "0"}}, "SLURM_STEP_NUM_TASKS"},
      {{{"SLURM_STEP_NUM_TASKS", "four"}}, "SLURM_STEP_NUM_TASKS"},
      {{{"SLURM_STEP_NODELIST", ""}}, "SLURM_STEP_NODELIST is not"},
      {{{"SLURM_STEP_NODELIST", "gpu[07-08"}}, "SLURM_STEP_NODELIST='gpu[07-08' is not a Slurm host list"},
  };
  for (const auto& c : cases) {
    const std::string message = error_of([&] { read_srun_env(fake(srun_task(c.changes))); });
    EXPECT_NE(message.find(c.names), std::string::npos) << message;
    EXPECT_EQ(test::code_of([&] { read_srun_env(fake(srun_task(c.changes))); }), aperture::ErrorCode::invalid_argument);
  }
}

TEST(Env, FirstHostOfASlurmHostList) {
  const std::pair<const char*, const char*> lists[] = {
      {"node1", "node1"},
      {"node[01-04]", "node01"},
      {"gpu[007,010-012],login1", "gpu007"},
      {"login1,gpu[1-2]", "login1"},
      {"rack[2-3]-node[05-06]", "rack2-node05"},
      {"10.77.0.[1-2]", "10.77.0.1"},
      {"ap1f-node[0-1]", "ap1f-node0"},
  };
  for (const auto& [list, first] : lists) EXPECT_EQ(first_host_of("SLURM_STEP_NODELIST", list), first) << list;
  for (const char* bad : {"", ",node1", "node[", "node]1", "node[]", "node[a-b]", "node[-1]", "node[1[2]]"}) {
    const std::string message = error_of([&] { first_host_of("SLURM_STEP_NODELIST", bad); });
    EXPECT_NE(message.find("is not a Slurm host list"), std::string::npos) << bad << ": " << message;
  }
}

// --- who started this process (bootstrap/launched_by.h) ---------------------------------------------

TEST(LaunchedBy, DetectedInTeamOrder) {
  EXPECT_EQ(detect_launched_by(fake({})), LaunchedBy::single);
  EXPECT_EQ(detect_launched_by(fake({{"APERTURE_RANK", "0"}, {"APERTURE_WORLD_SIZE", "2"}})), LaunchedBy::aperture);
  EXPECT_EQ(detect_launched_by(fake({{"OMPI_COMM_WORLD_SIZE", "2"}})), LaunchedBy::mpirun);
  EXPECT_EQ(detect_launched_by(fake({{"RANK", "0"}, {"WORLD_SIZE", "2"}})), LaunchedBy::torchrun);
  // Half a pair still marks its launcher: Team::from_env then reports what is missing.
  EXPECT_EQ(detect_launched_by(fake({{"APERTURE_WORLD_SIZE", "2"}})), LaunchedBy::aperture);
  // `aperture launch` takes precedence, as in Team::from_env, but mpirun's mark is still seen.
  const auto both = fake({{"APERTURE_RANK", "0"}, {"APERTURE_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(detect_launched_by(both), LaunchedBy::aperture);
  EXPECT_TRUE(has_launcher_variables(LaunchedBy::mpirun, both));
  EXPECT_FALSE(has_launcher_variables(LaunchedBy::torchrun, both));
}

TEST(LaunchedBy, SrunAfterTheOthers) {
  EXPECT_EQ(detect_launched_by(fake(srun_task())), LaunchedBy::srun);
  // A step of one task (`srun --pty bash`, where a user may run `aperture launch`) is no job, and
  // a batch script's shell (no step) neither.
  EXPECT_EQ(detect_launched_by(fake(srun_task({{"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_PROCID", "0"}}))),
            LaunchedBy::single);
  EXPECT_EQ(detect_launched_by(fake({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}})), LaunchedBy::single);
  // A malformed count still marks srun, so that reading it reports the error.
  EXPECT_EQ(detect_launched_by(fake(srun_task({{"SLURM_STEP_NUM_TASKS", "x"}}))), LaunchedBy::srun);
  // torchrun started by srun (one per node), and mpirun inside an allocation: their ranks are theirs.
  EXPECT_EQ(detect_launched_by(fake(srun_task({{"RANK", "5"}, {"WORLD_SIZE", "8"}}))), LaunchedBy::torchrun);
  EXPECT_EQ(detect_launched_by(fake(srun_task({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"}}))),
            LaunchedBy::mpirun);
}

TEST(LaunchedBy, MpiKnowsTheRanksOfMpirunAndOfSrunWithPmix) {
  EXPECT_TRUE(mpi_knows_the_ranks(fake({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}})));
  EXPECT_TRUE(mpi_knows_the_ranks(fake(srun_task())));
  EXPECT_FALSE(mpi_knows_the_ranks(fake(srun_task({{"PMIX_RANK", ""}}))));
  EXPECT_FALSE(mpi_knows_the_ranks(fake({{"RANK", "0"}, {"WORLD_SIZE", "2"}})));
  EXPECT_FALSE(mpi_knows_the_ranks(fake({})));
}

TEST(LaunchedBy, NamesAreTeamLaunchedBy) {
  EXPECT_EQ(launched_by_name(LaunchedBy::aperture), "aperture launch");
  EXPECT_EQ(launched_by_name(LaunchedBy::mpirun), "mpi");
  EXPECT_EQ(launched_by_name(LaunchedBy::torchrun), "torchrun");
  EXPECT_EQ(launched_by_name(LaunchedBy::srun), "srun");
  EXPECT_EQ(launched_by_name(LaunchedBy::single), "single");
  auto team = aperture::Team::single();
  EXPECT_EQ(team.launched_by(), "single");
  EXPECT_EQ(launched_by(team), LaunchedBy::single);
}

}  // namespace

// APERTURE_NODE names the node outright; APERTURE_NODES splits the ranks in blocks; a bad count
// is refused with the variable, the value and the range.
TEST(EnvNodes, NodeNameFromTheEnvironment) {
  const auto lookup = [](std::map<std::string, std::string> vars) {
    return [vars](const char* name) -> const char* {
      const auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  };
  EXPECT_FALSE(aperture::env::node_name(lookup({}), 0, 4).has_value());
  EXPECT_EQ(aperture::env::node_name(lookup({{"APERTURE_NODE", "rack7"}}), 3, 4).value(), "rack7");
  std::vector<int> nodes;
  for (int r = 0; r < 5; ++r) nodes.push_back(aperture::env::node_of_block(r, 5, 2));
  EXPECT_EQ(nodes, (std::vector<int>{0, 0, 0, 1, 1}));
  EXPECT_NE(aperture::env::node_name(lookup({{"APERTURE_NODES", "2"}}), 0, 4),
            aperture::env::node_name(lookup({{"APERTURE_NODES", "2"}}), 2, 4));
  EXPECT_EQ(aperture::env::node_name(lookup({{"APERTURE_NODES", "2"}}), 0, 4),
            aperture::env::node_name(lookup({{"APERTURE_NODES", "2"}}), 1, 4));
  try {
    (void)aperture::env::node_name(lookup({{"APERTURE_NODES", "5"}}), 0, 4);
    FAIL() << "APERTURE_NODES=5 with 4 ranks was accepted";
  } catch (const aperture::Error& e) {
    EXPECT_NE(std::string(e.what()).find("APERTURE_NODES=5"), std::string::npos) << e.what();
  }
}
