#include "common/env.h"

#include <cerrno>
#include <cstdlib>

#include "aperture/detail/env_timeout.h"
#include "aperture/error.h"
#include "common/format.h"

namespace aperture::env {

namespace {

// The table. Launcher variables are set by `aperture launch` for its ranks and read by
// Team::from_env (bootstrap/launcher_variables.cpp); the others tune the library.
constexpr Variable kVariables[] = {
    {"APERTURE_TIMEOUT", "seconds", "60", "(0, 1e7], fractions allowed",
     "How long aperture's blocking calls (Team calls, host waits, host collectives) wait before they throw; not "
     "calls inside MPI, OpenSHMEM, NCCL or NVSHMEM."},
    {"APERTURE_HEAP_SIZE", "size", "1G", "1 .. 16T, suffix K/M/G/T", "Each rank's heap of the shm provider."},
    {"APERTURE_GPU_HEAP_SIZE", "size", "1G (cuda-ipc), 256M (cuda-vmm)", "1 .. 16T, suffix K/M/G/T",
     "cuda-ipc: each rank's GPU heap; cuda-vmm: the initial heap and the least one growth adds."},
    {"APERTURE_VMM_RESERVE", "size", "64G", "1 .. 16T, suffix K/M/G/T",
     "cuda-vmm: the virtual address space reserved for each rank's heap (address space, not memory)."},
    {"APERTURE_RANK", "integer", "unset", "0 .. APERTURE_WORLD_SIZE-1", "Set by `aperture launch`: this rank.", true},
    {"APERTURE_WORLD_SIZE", "integer", "unset", "1 .. 65536", "Set by `aperture launch`: the number of ranks.", true},
    {"APERTURE_LOCAL_RANK", "integer", "unset", "0 .. APERTURE_LOCAL_SIZE-1",
     "Set by `aperture launch`: this rank among the ranks of its machine.", true},
    {"APERTURE_LOCAL_SIZE", "integer", "unset", "1 .. 65536",
     "Set by `aperture launch`: the ranks on this machine (GPU providers check one GPU per rank).", true},
    {"APERTURE_HUB", "text", "unset", "unix:@name or tcp:host:port",
     "Set by `aperture launch`: the rendezvous hub the ranks connect to.", true},
    {"APERTURE_JOB_TOKEN", "text", "unset", "any",
     "Set by `aperture launch`: the secret a rank and its hub prove to each other, never sent (torchrun: defaults to "
     "TORCHELASTIC_RUN_ID).", true},
    {"APERTURE_NODE", "text", "unset", "any name",
     "Set by `aperture launch --nodes`: the node this rank runs on; ranks with other names share no memory.", true},
    {"APERTURE_NODES", "integer", "unset", "1 .. the number of ranks",
     "Splits any job into this many nodes by rank blocks (testing multi-node code on one machine)."},
    {"APERTURE_HUB_HOST", "text", "127.0.0.1 (mpirun: the host name)", "an IPv4 address of this machine",
     "The address the TCP hub listens on and ranks reach it at (`aperture launch --nodes`; rank 0 under mpirun, where the default is the host name)."},
    {"APERTURE_NODE_EXEC", "text", "unset", "a command with {node}",
     "`aperture launch --nodes`: put before each rank's command to run it on its node ({node}: the node's number)."},
    {"APERTURE_ENGINE", "text", "rma", "rma or messages",
     "Host memory on other nodes: rma (MPI one-sided) or messages (MPI send/receive to the target's service "
     "thread); GPU memory always takes messages."},
    {"APERTURE_MASTER_PORT", "integer", "the first free of MASTER_PORT+1 .. +8", "1 .. 65535",
     "torchrun jobs: the port of aperture's rendezvous (MASTER_PORT is torch's own store)."},
    {"APERTURE_COLLECTIVES_SPINS", "integer", "256 (16 when ranks outnumber cores)", "0 .. 4294967295",
     "Collectives: how often a host waiter polls before it yields."},
    {"APERTURE_COLLECTIVES_PDL", "flag", "1", "0 or 1",
     "Collectives: 0 turns off programmatic dependent launch on GPUs that have it (compute capability 9.0+)."},
    {"APERTURE_COLLECTIVES_BETWEEN_NODES", "text", "auto", "auto, nccl or mpi",
     "Collectives across nodes, GPU memory: the exchange between nodes on NCCL (nccl; auto when built with NCCL) or MPI "
     "through pinned host staging (mpi; auto when built without NCCL); host memory always takes MPI. "
     "Every rank must set the same."},
};

const char* value_of(const Lookup& env, std::string_view name) {
  const char* text = env(std::string(name).c_str());
  return text == nullptr || *text == '\0' ? nullptr : text;
}

const char* process_value(std::string_view name) { return value_of(process(), name); }

}  // namespace

Lookup process() {
  return [](const char* name) { return std::getenv(name); };
}

std::span<const Variable> variables() { return kVariables; }

std::vector<std::string> launcher_variables() {
  std::vector<std::string> names;
  for (const Variable& v : kVariables)
    if (v.set_by_launcher) names.emplace_back(v.name);
  return names;
}

std::string markdown_table() {
  std::string table = "| Variable | Type | Default | Range | What it does |\n|---|---|---|---|---|\n";
  for (const Variable& v : kVariables)
    table += detail::format("| `{}` | {} | {} | {} | {} |\n", v.name, v.type, v.default_value, v.range, v.doc);
  return table;
}

int parse_int(std::string_view name, const char* text, long min, long max) {
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*text == '\0' || end == text || *end != '\0' || errno == ERANGE)
    throw Error(ErrorCode::invalid_argument,
                detail::format("{}='{}' is not an integer; set it to a number in {}..{}", name, text, min, max));
  if (value < min || value > max)
    throw Error(ErrorCode::invalid_argument,
                detail::format("{}={} is out of range; it must be in {}..{}", name, value, min, max));
  return static_cast<int>(value);
}

std::size_t parse_size(std::string_view name, const char* text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  std::size_t scale = 1;
  if (end != text && *end != '\0' && end[1] == '\0') {
    switch (*end) {
      case 'K': case 'k': scale = std::size_t{1} << 10; ++end; break;
      case 'M': case 'm': scale = std::size_t{1} << 20; ++end; break;
      case 'G': case 'g': scale = std::size_t{1} << 30; ++end; break;
      case 'T': case 't': scale = std::size_t{1} << 40; ++end; break;
      default: break;
    }
  }
  if (end == text || *end != '\0' || errno == ERANGE || *text == '-' || value == 0 ||
      value > (std::size_t{1} << 44) / scale)
    throw Error(ErrorCode::invalid_argument,
                detail::format("{}='{}' is not a size; give bytes with an optional K, M, G or T suffix (e.g. 4G), at "
                               "least 1 and at most 16T",
                               name, text));
  return static_cast<std::size_t>(value) * scale;
}

bool parse_flag(std::string_view name, const char* text) {
  const std::string_view value(text);
  if (value == "0") return false;
  if (value == "1") return true;
  throw Error(
      ErrorCode::invalid_argument,
      detail::format("{}='{}' is not a flag; set it to 1 (on) or 0 (off), or unset it for the default", name, text));
}

double timeout_seconds() { return detail::timeout_seconds(); }

std::size_t heap_size() {
  const char* text = process_value("APERTURE_HEAP_SIZE");
  return text == nullptr ? kShmHeapDefault : parse_size("APERTURE_HEAP_SIZE", text);
}

std::size_t gpu_heap_size(std::size_t fallback) {
  const char* text = process_value("APERTURE_GPU_HEAP_SIZE");
  return text == nullptr ? fallback : parse_size("APERTURE_GPU_HEAP_SIZE", text);
}

std::size_t vmm_reserve() {
  const char* text = process_value("APERTURE_VMM_RESERVE");
  return text == nullptr ? kVmmReserveDefault : parse_size("APERTURE_VMM_RESERVE", text);
}

std::optional<std::string> node_name(const Lookup& env, int rank, int world_size) {
  if (const char* name = value_of(env, "APERTURE_NODE")) return std::string(name);
  const char* nodes = value_of(env, "APERTURE_NODES");
  if (nodes == nullptr) return std::nullopt;
  const int count = parse_int("APERTURE_NODES", nodes, 1, world_size);
  return detail::format("APERTURE_NODES-{}", node_of_block(rank, world_size, count));
}

int node_of_block(int rank, int world_size, int nodes) {
  return static_cast<int>(static_cast<long long>(rank) * nodes / world_size);
}

std::optional<std::string> hub_host() {
  const char* host = process_value("APERTURE_HUB_HOST");
  if (host == nullptr) return std::nullopt;
  return std::string(host);
}

std::string node_exec() {
  const char* command = process_value("APERTURE_NODE_EXEC");
  return command == nullptr ? std::string() : std::string(command);
}

std::optional<int> master_port(const Lookup& env) {
  // Set-but-empty is an error here (as before): an empty port is a mistake, not "the default".
  const char* text = env("APERTURE_MASTER_PORT");
  if (text == nullptr) return std::nullopt;
  return parse_int("APERTURE_MASTER_PORT", text, 1, 65535);
}

int local_size(const Lookup& env) {
  // status() asks before any Team exists and must not throw: a malformed value counts as unsaid.
  for (const char* name : {"APERTURE_LOCAL_SIZE", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
    const char* text = value_of(env, name);
    if (text == nullptr) continue;
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (end != text && *end == '\0' && value > 0 && value < (1 << 20)) return static_cast<int>(value);
  }
  return 0;
}

bool engine_messages() {
  const char* text = process_value("APERTURE_ENGINE");
  if (text == nullptr) return false;
  const std::string_view value(text);
  if (value == "rma") return false;
  if (value == "messages") return true;
  throw Error(ErrorCode::invalid_argument,
              detail::format("APERTURE_ENGINE='{}' is not an engine; set it to rma (MPI one-sided communication, the "
                             "default) or messages (MPI send/receive to each rank's service thread), or unset it",
                             text));
}

std::optional<unsigned> collectives_spins() {
  const char* text = process_value("APERTURE_COLLECTIVES_SPINS");
  if (text == nullptr) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const unsigned long value = std::strtoul(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || *text == '-' || value > 0xFFFFFFFFul)
    throw Error(ErrorCode::invalid_argument,
                detail::format("APERTURE_COLLECTIVES_SPINS='{}' is not a count; set it to a number in 0..4294967295, "
                               "or unset it for the default",
                               text));
  return static_cast<unsigned>(value);
}

bool collectives_pdl() {
  const char* text = process_value("APERTURE_COLLECTIVES_PDL");
  return text == nullptr || parse_flag("APERTURE_COLLECTIVES_PDL", text);
}

BetweenNodes parse_between_nodes(const char* text) {
  if (text == nullptr || *text == '\0') return BetweenNodes::automatic;
  const std::string_view value(text);
  if (value == "auto") return BetweenNodes::automatic;
  if (value == "nccl") return BetweenNodes::nccl;
  if (value == "mpi") return BetweenNodes::mpi;
  throw Error(ErrorCode::invalid_argument,
              detail::format("APERTURE_COLLECTIVES_BETWEEN_NODES='{}' is not a path; set it to auto (NCCL for GPU "
                             "memory where aperture was built with NCCL, else MPI), nccl or mpi, or unset it",
                             text));
}

BetweenNodes collectives_between_nodes() {
  return parse_between_nodes(process_value("APERTURE_COLLECTIVES_BETWEEN_NODES"));
}

}  // namespace aperture::env
