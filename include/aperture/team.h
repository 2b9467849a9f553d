// aperture/team.h — who we are, and how ranks talk before any symmetric memory exists.
//
// Team::from_env() finds its peers from the environment, in this order:
//   1. `aperture launch` (APERTURE_RANK, APERTURE_WORLD_SIZE, APERTURE_HUB, APERTURE_JOB_TOKEN);
//   2. Open MPI (`mpirun`/`oshrun`: OMPI_COMM_WORLD_RANK/SIZE), when aperture was built with MPI;
//   3. torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT): rank 0 serves a TCP
//      rendezvous on MASTER_ADDR at the first free port of MASTER_PORT+1 .. +8 (torch's store has
//      MASTER_PORT), or at APERTURE_MASTER_PORT; the others join the first of those ports whose
//      listener proves the job token (a process of someone else's may listen on an earlier one);
//   4. Slurm's srun, a step of more than one task (SLURM_PROCID, SLURM_STEP_NUM_TASKS): with PMIx
//      (`srun --mpi=pmix`, PMIX_RANK set) and aperture built with MPI, as under mpirun (MPI_Init
//      learns the job from srun); otherwise rank 0 serves a TCP rendezvous on the step's first node
//      (SLURM_STEP_NODELIST, or MASTER_ADDR), at the first free port of eight chosen by the job and
//      step ids (MASTER_PORT+1 .. +8 when MASTER_PORT is set; APERTURE_MASTER_PORT exactly);
//   5. otherwise a team of one rank.
//
// barrier, allgather, broadcast and check_same are collective: every rank makes the same calls
// in the same order. A mismatch (another call, other sizes, another root) is reported on every
// rank as aperture::Error. Every call gives up after APERTURE_TIMEOUT seconds (default 60) with
// an error naming the ranks that did not arrive, and a rank that dies fails the others' calls
// at once instead of leaving them waiting.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "aperture/export.h"

namespace aperture {

namespace detail {
class TeamTransport;
}

class APERTURE_API Team {
 public:
  static Team from_env();
  static Team single();  // a team of one rank, whatever the environment says

  Team(Team&&) noexcept;
  Team& operator=(Team&&) noexcept;
  ~Team();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // rank among the ranks of this machine
  int local_size() const { return local_size_; }  // ranks on this machine
  bool same_node(int peer) const;                 // does `peer` run on this machine?
  // Nodes are numbered 0..node_count()-1 in the order of their lowest rank. Ranks on one node can
  // map each other's memory; ranks on different nodes are reached through an engine (MPI RMA).
  int node() const { return node_of_rank_[rank_]; }
  int node_count() const { return node_count_; }
  int node_of(int rank) const;  // throws aperture::Error for a rank outside 0..size()-1
  // Who started the ranks: "aperture launch", "mpi", "torchrun", "srun" or "single".
  std::string_view launched_by() const { return launched_by_; }

  void barrier();
  // Gathers bytes_each bytes from every rank into `all` (size() * bytes_each bytes, rank order).
  void allgather(const void* mine, void* all, std::size_t bytes_each);
  void broadcast(void* buf, std::size_t bytes, int root);

  // Collective: checks that every rank called `call` with the same named arguments, and throws
  // aperture::Error on every rank, naming the ranks and values that differ, when they did not.
  // Providers call it before every collective allocation so a mismatch never corrupts memory.
  void check_same(std::string_view call, std::span<const std::pair<std::string_view, std::uint64_t>> args);
  void check_same(std::string_view call, std::initializer_list<std::pair<std::string_view, std::uint64_t>> args) {
    check_same(call, std::span<const std::pair<std::string_view, std::uint64_t>>(args.begin(), args.size()));
  }

 private:
  Team(int rank, int size, std::string launched_by, std::unique_ptr<detail::TeamTransport> transport);
  void learn_nodes();

  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  int node_count_ = 1;
  std::string launched_by_ = "single";
  std::unique_ptr<int[]> node_of_rank_;
  std::unique_ptr<detail::TeamTransport> transport_;
};

}  // namespace aperture
