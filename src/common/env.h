// src/common/env.h — every APERTURE_* environment variable, declared once and read once.
//
// variables() is the table: name, type, default, range and a one-line description of each
// variable aperture reads (or its launcher sets for the ranks). README.md's table of variables
// is this table, checked by the unit test Env.ReadmeTableMatchesRegistry. The readers below
// validate their variable and throw aperture::Error (invalid_argument) naming the variable, its
// value and the fix. Nothing else in src/ calls getenv on an APERTURE_* name (the other getenv
// calls there read other programs' variables: NVSHMEM_*, OMPI_*, PATH). Every library links
// these readers through one target, aperture_common (src/CMakeLists.txt).
//
// APERTURE_TIMEOUT is read through aperture/detail/env_timeout.h, which the header-only host
// waits share with the library.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace aperture::env {

// Where variables come from: the process environment (process()), or a map in tests and fuzzers.
using Lookup = std::function<const char*(const char*)>;
Lookup process();

struct Variable {
  std::string_view name;
  std::string_view type;           // seconds, size, integer, flag or text
  std::string_view default_value;  // "unset" when it has none
  std::string_view range;
  std::string_view doc;  // one line
  bool set_by_launcher = false;  // `aperture launch` sets it for each rank
};

// The table, in the order README.md lists it.
std::span<const Variable> variables();
// The variables `aperture launch` sets for its ranks (the rows with set_by_launcher).
std::vector<std::string> launcher_variables();
// The table as README.md's Markdown table (header, separator and one row per variable).
std::string markdown_table();

// Defaults that differ per provider; the table shows both.
inline constexpr std::size_t kShmHeapDefault = std::size_t{1} << 30;
inline constexpr std::size_t kCudaIpcHeapDefault = std::size_t{1} << 30;
inline constexpr std::size_t kCudaVmmHeapDefault = std::size_t{256} << 20;
inline constexpr std::size_t kVmmReserveDefault = std::size_t{64} << 30;

// --- readers -----------------------------------------------------------------------------------
double timeout_seconds();                           // APERTURE_TIMEOUT
std::size_t heap_size();                            // APERTURE_HEAP_SIZE (shm)
std::size_t gpu_heap_size(std::size_t fallback);    // APERTURE_GPU_HEAP_SIZE (cuda-ipc, cuda-vmm)
std::size_t vmm_reserve();                          // APERTURE_VMM_RESERVE (cuda-vmm)
std::optional<int> master_port(const Lookup& env);  // APERTURE_MASTER_PORT (torchrun jobs)
// The node `rank` runs on as the environment says: APERTURE_NODE, else block `node_of_block` of
// APERTURE_NODES; nullopt when neither is set (the machine itself then decides).
std::optional<std::string> node_name(const Lookup& env, int rank, int world_size);
// Rank blocks: of `world_size` ranks over `nodes` nodes, the node of `rank` (the lowest ranks on node 0).
int node_of_block(int rank, int world_size, int nodes);
std::optional<std::string> hub_host();  // APERTURE_HUB_HOST, nullopt when unset
std::string node_exec();  // APERTURE_NODE_EXEC, empty when unset
// Ranks on this machine as the launcher says (APERTURE_LOCAL_SIZE, else torchrun's
// LOCAL_WORLD_SIZE, else Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE); 0 when none says it.
int local_size(const Lookup& env);
bool engine_messages();                       // APERTURE_ENGINE: messages (true) or rma (false, the default)
std::optional<unsigned> collectives_spins();  // APERTURE_COLLECTIVES_SPINS
bool collectives_pdl();                       // APERTURE_COLLECTIVES_PDL
// APERTURE_COLLECTIVES_BETWEEN_NODES: what the collectives of a team across nodes exchange GPU
// memory between nodes on (src/collectives/between_nodes_choice.h decides from it).
enum class BetweenNodes { automatic, nccl, mpi };
BetweenNodes collectives_between_nodes();
// "auto" (or null, or empty), "nccl" or "mpi"; anything else throws naming the value and the choices.
BetweenNodes parse_between_nodes(const char* text);

// --- parsers (each throws aperture::Error naming `name` and `text`) ------------------------------
// An integer in [min, max].
int parse_int(std::string_view name, const char* text, long min, long max);
// Bytes with an optional K, M, G or T suffix (powers of 1024), in [1, 16T].
std::size_t parse_size(std::string_view name, const char* text);
// "0" or "1".
bool parse_flag(std::string_view name, const char* text);

}  // namespace aperture::env
