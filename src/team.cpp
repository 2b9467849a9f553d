#include "aperture/team.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "aperture/detail/host_wait.h"
#include "aperture/error.h"
#include "bootstrap/launcher_variables.h"
#include "bootstrap/hub.h"
#include "bootstrap/hub_client.h"
#include "bootstrap/launched_by.h"
#include "common/env.h"
#include "common/format.h"
#if APERTURE_WITH_MPI
#  include "bootstrap/mpi.h"
#endif

namespace aperture {

namespace {

std::chrono::milliseconds team_timeout() {
  return std::chrono::milliseconds(static_cast<long long>(detail::timeout_seconds() * 1000.0));
}

std::string this_host() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// Two ranks are on the same machine when they run on the same kernel. The host name alone is not
// enough: machines can share one (cloned VMs, containers named alike), and shm would then open
// /proc/<pid>/fd of whatever local process has a remote rank's pid. The kernel's boot id tells
// machines apart; the host name keeps the key readable.
std::string node_identity() {
  std::string identity = this_host();
  if (std::FILE* file = std::fopen("/proc/sys/kernel/random/boot_id", "re")) {
    char boot_id[64] = {};
    if (std::fgets(boot_id, sizeof boot_id, file) != nullptr)
      identity += "/" + std::string(boot_id, std::strcspn(boot_id, "\n"));
    std::fclose(file);
  }
  return identity;
}

// Rank 0 of a torchrun job serves the hub on a thread and joins it like any rank; it listens on
// the first of `ports` that is free, and the others join the first whose listener proves, by the
// handshake, that it is this job's hub.
std::unique_ptr<detail::TeamTransport> host_or_join_tcp_hub(int rank, int size, const std::vector<int>& ports,
                                                            const std::string& master_addr, std::string token) {
  const auto timeout = team_timeout();
  if (rank != 0) {
    std::vector<std::string> addresses;
    addresses.reserve(ports.size());
    for (const int port : ports) addresses.push_back(detail::format("tcp:{}:{}", master_addr, port));
    return std::make_unique<detail::HubClient>(addresses, rank, size, token, timeout);
  }
  detail::HubOptions options;
  options.world_size = size;
  options.token = std::move(token);
  options.timeout = timeout;
  options.transport = "tcp";
  options.bind_host = "0.0.0.0";
  options.advertise_host = master_addr;
  std::unique_ptr<detail::Hub> hub;
  for (std::size_t i = 0; hub == nullptr; ++i) {
    options.bind_port = ports[i];
    try {
      hub = std::make_unique<detail::Hub>(options);
    } catch (const Error& e) {
      if (e.call() != "bind" || i + 1 == ports.size()) throw;
    }
  }
  auto client = std::make_unique<detail::HubClient>(hub->address(), rank, size, options.token, timeout);
  client->own_hub(std::move(hub));
  return client;
}

#if APERTURE_WITH_MPI
struct JoinedThroughMpi {
  detail::MpiWorld world;
  std::unique_ptr<detail::TeamTransport> transport;
};

// Under a launcher MPI knows (mpirun, srun with PMIx): MPI only carries the hub's address and the
// job token from rank 0; the hub does the rest.
JoinedThroughMpi join_through_mpi() {
  const detail::MpiWorld world = detail::mpi_world();
  if (world.size == 1) return {world, std::make_unique<detail::SoloTransport>()};
  const std::string token = world.rank == 0 ? detail::make_job_token() : std::string();
  // Where the others reach rank 0's hub: APERTURE_HUB_HOST when set (a host name that does not
  // resolve on the other nodes, as on simulated nodes), else this host's name.
  const std::string host = aperture::env::hub_host().value_or(this_host());
  std::unique_ptr<detail::Hub> hub;
  std::string address;
  if (world.rank == 0) {
    detail::HubOptions options;
    options.world_size = world.size;
    options.token = token;
    options.timeout = team_timeout();
    options.transport = "tcp";
    options.bind_host = "0.0.0.0";
    options.advertise_host = host;
    hub = std::make_unique<detail::Hub>(options);
    address = hub->address();
  }
  address = detail::mpi_broadcast_from_rank0(address);
  const std::string shared_token = detail::mpi_broadcast_from_rank0(token);
  // Ranks on rank 0's machine reach the hub over loopback: the host name may not resolve.
  const std::string prefix = "tcp:" + this_host() + ":";
  if (address.rfind(prefix, 0) == 0) address = "tcp:127.0.0.1:" + address.substr(prefix.size());
  auto client = std::make_unique<detail::HubClient>(address, world.rank, world.size, shared_token, team_timeout());
  if (hub) client->own_hub(std::move(hub));
  return {world, std::move(client)};
}
#endif

// How many ports aperture's own rendezvous tries, from its first, where no port is named.
constexpr int kRendezvousPorts = 8;

// Ports for aperture's rendezvous in an srun step with no port named: 8 of [20000, 30000), below
// Linux's ephemeral range, chosen by the job and step (FNV-1a: the same on every node and build),
// so that steps running side by side on a node mostly take different ones; a port taken anyway
// is passed over, and the job token tells the others which listener is their step's.
int srun_rendezvous_base(const std::string& job_id, const std::string& step_id) {
  std::uint64_t hash = 14695981039346656037ull;
  for (const char c : job_id + "." + step_id) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return 20000 + static_cast<int>(hash % 1250) * 8;
}

// The ports rank 0 tries for the rendezvous, in order: exactly APERTURE_MASTER_PORT when it is
// named, else kRendezvousPorts from `first` (those up to 65535).
std::vector<int> rendezvous_ports(const std::optional<int>& named, int first) {
  if (named) return {*named};
  std::vector<int> ports;
  for (int port = first; port < first + kRendezvousPorts && port <= 65535; ++port) ports.push_back(port);
  return ports;
}

// How a launcher's own words name the rendezvous's parts, for the error its rank 0 gives when
// none of the ports is free.
struct RendezvousWords {
  std::string launcher;  // "torchrun", "srun"
  std::string who;       // "rank 0", "task 0"
  std::string place;     // "host", "node"
  std::string peers;     // "rank", "task"
  std::string from;      // how the ports were chosen when none is named
};

// Rank 0 serves the rendezvous on the first free of `ports`, the others join it at `host`; a bind
// failure on every port becomes one error in the launcher's words.
std::unique_ptr<detail::TeamTransport> rendezvous(int rank, int size, const std::vector<int>& ports, bool named,
                                                  const std::string& host, std::string token,
                                                  const RendezvousWords& words) {
  try {
    return host_or_join_tcp_hub(rank, size, ports, host, std::move(token));
  } catch (const Error& e) {
    if (e.call() != "bind") throw;  // only rank 0 binds
    const std::string why =
        named ? detail::format("APERTURE_MASTER_PORT={} is not free on {}'s {}", ports.front(), words.who, words.place)
              : detail::format("under {} aperture's rendezvous takes the first free port of {} .. {} ({}), and every "
                               "one is taken",
                               words.launcher, ports.front(), ports.back(), words.from);
    throw Error(ErrorCode::system,
                detail::format("{} cannot serve aperture's rendezvous: {}; {}; set APERTURE_MASTER_PORT to a port that "
                               "is free on {}'s {}, the same on every {}",
                               words.who, e.detail(), why, words.who, words.place, words.peers),
                "bind");
  }
}

}  // namespace

Team::Team(int rank, int size, std::string launched_by, std::unique_ptr<detail::TeamTransport> transport)
    : rank_(rank), size_(size), launched_by_(std::move(launched_by)), transport_(std::move(transport)) {
  learn_nodes();
}

Team::Team(Team&&) noexcept = default;
Team& Team::operator=(Team&&) noexcept = default;
Team::~Team() = default;

Team Team::single() {
  return Team(0, 1, std::string(detail::launched_by_name(detail::LaunchedBy::single)),
              std::make_unique<detail::SoloTransport>());
}

Team Team::from_env() {
  using detail::LaunchedBy;
  const auto env = detail::process_env();
  const LaunchedBy launcher = detail::detect_launched_by(env);
  const std::string name(detail::launched_by_name(launcher));
  if (launcher == LaunchedBy::aperture) {
    const auto launch = detail::read_launch_env(env).value();
    return Team(
        launch.rank, launch.world_size, name,
        std::make_unique<detail::HubClient>(launch.hub, launch.rank, launch.world_size, launch.token, team_timeout()));
  }
  if (launcher == LaunchedBy::mpirun) {
    [[maybe_unused]] const auto mpi = detail::read_mpi_env(env).value();
#if APERTURE_WITH_MPI
    JoinedThroughMpi joined = join_through_mpi();
    return Team(joined.world.rank, joined.world.size, name, std::move(joined.transport));
#else
    if (mpi.world_size > 1)
      throw Error(ErrorCode::unavailable,
                  detail::format("this process was started by mpirun (OMPI_COMM_WORLD_SIZE={}) but aperture was built "
                                 "without MPI; rebuild with MPI found (install libopenmpi-dev) or start the ranks with "
                                 "`aperture launch -n N -- program`",
                                 mpi.world_size));
    return single();
#endif
  }
  if (launcher == LaunchedBy::srun) {
    const auto srun = detail::read_srun_env(env).value();
#if APERTURE_WITH_MPI
    if (srun.pmix) {
      // `srun --mpi=pmix`: MPI_Init learns the job from srun, as from mpirun.
      JoinedThroughMpi joined = join_through_mpi();
      if (joined.world.rank != srun.rank || joined.world.size != srun.world_size)
        throw Error(ErrorCode::invalid_argument,
                    detail::format("srun started this process as task {} of {} (SLURM_PROCID, SLURM_STEP_NUM_TASKS) "
                                   "with PMIx, but MPI_Init made it rank {} of {}: this MPI does not take the job "
                                   "from srun's PMIx; start the ranks with mpirun inside the allocation instead",
                                   srun.rank, srun.world_size, joined.world.rank, joined.world.size));
      return Team(joined.world.rank, joined.world.size, name, std::move(joined.transport));
    }
#endif
    // Without PMIx (or MPI): aperture's own rendezvous, as under torchrun, on the step's first
    // node, where task 0 runs under srun's block and cyclic layouts.
    const char* master_addr = env("MASTER_ADDR");
    const bool addr_named = master_addr != nullptr && *master_addr != '\0';
    if (srun.rank == 0 && !addr_named && !srun.this_node.empty() && srun.this_node != srun.first_node)
      throw Error(ErrorCode::invalid_argument,
                  detail::format("srun started task 0 on node '{}', but the other tasks look for aperture's rendezvous "
                                 "on the step's first node, '{}' (SLURM_STEP_NODELIST; a step laid out with "
                                 "--distribution=arbitrary?); set MASTER_ADDR to an address of '{}' on every task",
                                 srun.this_node, srun.first_node, srun.this_node));
    const std::string host = addr_named ? std::string(master_addr) : srun.first_node;
    const auto named = aperture::env::master_port(env);
    const char* torch_port = env("MASTER_PORT");  // torch.distributed's store is there
    const int first_port =
        named        ? *named
        : torch_port ? detail::parse_int_variable("MASTER_PORT", torch_port, 1, 65535 - kRendezvousPorts) + 1
                     : srun_rendezvous_base(srun.job_id, srun.step_id);
    std::string token = "srun:" + srun.cluster + ":" + srun.job_id + "." + srun.step_id;
    if (const char* t = env("APERTURE_JOB_TOKEN")) token = t;
    const RendezvousWords words{"srun", "task 0", "node", "task",
                                torch_port ? "from MASTER_PORT + 1" : "from SLURM_JOB_ID and SLURM_STEP_ID"};
    return Team(srun.rank, srun.world_size, name,
                rendezvous(srun.rank, srun.world_size, rendezvous_ports(named, first_port), named.has_value(), host,
                           std::move(token), words));
  }
  if (launcher == LaunchedBy::torchrun) {
    const auto torchrun = detail::read_torchrun_env(env);
    if (torchrun->world_size == 1) return single();
    // torch.distributed's own TCPStore listens on MASTER_PORT. The port after it is nobody's
    // reservation: a connection to that store can hold it as its local port (most often when
    // MASTER_PORT lies in the system's ephemeral range). So the hub takes the first free port of
    // MASTER_PORT + 1 .. + kRendezvousPorts, or exactly APERTURE_MASTER_PORT when that is set.
    const auto named = aperture::env::master_port(env);
    if (!named && torchrun->master_port == 65535)
      throw Error(
          ErrorCode::invalid_argument,
          "MASTER_PORT=65535 leaves no port for aperture's rendezvous; set APERTURE_MASTER_PORT to a free port");
    std::string token;
    if (const char* t = env("APERTURE_JOB_TOKEN")) token = t;
    else if (const char* run_id = env("TORCHELASTIC_RUN_ID")) token = run_id;
    const RendezvousWords words{"torchrun", "rank 0", "host", "rank",
                                detail::format("MASTER_PORT + 1 .. + {}; torch's store has MASTER_PORT",
                                               kRendezvousPorts)};
    return Team(torchrun->rank, torchrun->world_size, name,
                rendezvous(torchrun->rank, torchrun->world_size, rendezvous_ports(named, torchrun->master_port + 1),
                           named.has_value(), torchrun->master_addr, std::move(token), words));
  }
  return single();
}

void Team::learn_nodes() {
  // Ranks on the same machine share a host name; they are the ones that can map each other's
  // host memory. A launcher that splits a job into nodes (`aperture launch --nodes`, or
  // APERTURE_NODES for any launcher) names the node instead: ranks it puts on other nodes then
  // share no memory even where they could.
  constexpr std::size_t kHost = 256;  // a host name (at most 64 bytes on Linux), '/', a boot id
  char mine[kHost] = {};
  const auto named = env::node_name(env::process(), rank_, size_);
  const std::string host = named ? "named:" + *named : node_identity();
  host.copy(mine, kHost - 1);  // mine stays NUL-terminated: it was zeroed
  std::vector<char> all(kHost * static_cast<std::size_t>(size_));
  transport_->allgather(mine, all.data(), kHost);
  std::map<std::string, int> node_ids;
  node_of_rank_ = std::make_unique<int[]>(size_);
  local_rank_ = 0;
  local_size_ = 0;
  for (int r = 0; r < size_; ++r) {
    const std::string name(all.data() + r * kHost, ::strnlen(all.data() + r * kHost, kHost));
    node_of_rank_[r] = node_ids.emplace(name, static_cast<int>(node_ids.size())).first->second;
  }
  node_count_ = static_cast<int>(node_ids.size());
  for (int r = 0; r < size_; ++r) {
    if (node_of_rank_[r] != node_of_rank_[rank_]) continue;
    if (r < rank_) ++local_rank_;
    ++local_size_;
  }
}

int Team::node_of(int rank) const {
  if (rank < 0 || rank >= size_)
    throw Error(ErrorCode::invalid_argument,
                detail::format("node_of({}): no such rank; this team has ranks 0..{}", rank, size_ - 1));
  return node_of_rank_[rank];
}

bool Team::same_node(int peer) const {
  return peer >= 0 && peer < size_ && node_of_rank_[peer] == node_of_rank_[rank_];
}

void Team::barrier() { transport_->barrier(); }

void Team::allgather(const void* mine, void* all, std::size_t bytes_each) {
  if (bytes_each != 0 && (mine == nullptr || all == nullptr))
    throw Error(ErrorCode::invalid_argument, detail::format("allgather of {} bytes each: null buffer", bytes_each));
  transport_->allgather(mine, all, bytes_each);
}

void Team::broadcast(void* buf, std::size_t bytes, int root) {
  if (root < 0 || root >= size_)
    throw Error(ErrorCode::invalid_argument,
                detail::format("broadcast: root {} is out of range; this team has ranks 0..{}", root, size_ - 1));
  if (bytes != 0 && buf == nullptr)
    throw Error(ErrorCode::invalid_argument, detail::format("broadcast of {} bytes: null buffer", bytes));
  transport_->broadcast(buf, bytes, root);
}

void Team::check_same(std::string_view call, std::span<const std::pair<std::string_view, std::uint64_t>> args) {
  // A fixed-size record per rank: the call's name and up to kMaxArgs named arguments.
  constexpr std::size_t kMaxArgs = 12;
  constexpr std::size_t kNameBytes = 32;
  struct Record {
    char call[48];
    std::uint32_t count;
    char names[kMaxArgs][kNameBytes];
    std::uint64_t values[kMaxArgs];
  };
  if (args.size() > kMaxArgs)
    throw Error(ErrorCode::invalid_argument,
                detail::format("check_same: at most {} arguments can be compared", kMaxArgs));
  Record mine{};
  std::memcpy(mine.call, call.data(), std::min(call.size(), sizeof mine.call - 1));
  mine.count = static_cast<std::uint32_t>(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::memcpy(mine.names[i], args[i].first.data(), std::min(args[i].first.size(), sizeof mine.names[i] - 1));
    mine.values[i] = args[i].second;
  }
  std::vector<Record> all(static_cast<std::size_t>(size_));
  transport_->allgather(&mine, all.data(), sizeof(Record));
  auto describe = [](const Record& r) {
    std::string text = r.call;
    text += "(";
    for (std::uint32_t i = 0; i < r.count && i < kMaxArgs; ++i)
      text += detail::format("{}{}={}", i ? ", " : "", std::string(r.names[i], ::strnlen(r.names[i], kNameBytes)),
                             r.values[i]);
    return text + ")";
  };
  std::map<std::string, std::vector<int>> groups;
  for (int r = 0; r < size_; ++r) groups[describe(all[r])].push_back(r);
  if (groups.size() == 1) return;
  std::string detail;
  for (auto& [what, ranks] : groups) {
    std::string list;
    for (int r : ranks) list += (list.empty() ? "" : ",") + std::to_string(r);
    detail += detail::format("\n  rank{} {}: {}", ranks.size() > 1 ? "s" : "", list, what);
  }
  throw Error(ErrorCode::mismatch,
              detail::format("collective call mismatch in {} (seen on rank {}):{}\nEvery rank must make the same "
                             "collective calls in the same order with the same arguments.",
                             std::string(call), rank_, detail));
}

}  // namespace aperture
