// src/launcher/torch_variables.h — what torch.distributed reads, set by `aperture launch` for its ranks.
//
// With RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set as
// torchrun sets them, torch.distributed.init_process_group("env://") works unchanged in the ranks
// of `aperture launch`. Team::from_env() still joins the launcher's job: its variables come first
// (team.h). MASTER_PORT is a TCP port on loopback that was free when the job started (the ranks are
// on this machine); torch's rank 0 listens there. Under --mpi the launcher sets MASTER_ADDR and
// MASTER_PORT, and the rank shim (mpi_rank_shim.cpp) the others, from Open MPI's variables. Across
// nodes (--nodes, a hostfile, a Slurm allocation of several nodes) MASTER_ADDR and MASTER_PORT are
// left to the user: the launcher does not know rank 0's node address.
//
// Private to src/launcher.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace aperture::launcher {

// A TCP port of 127.0.0.1 that nothing listened on a moment ago (the kernel's pick for port 0).
// Throws std::runtime_error when no socket can be had.
int free_loopback_port();

// torchrun's variables for rank `rank` of `ranks` (`local_rank` of `local_size` on its node), with
// the rendezvous at 127.0.0.1:port; port 0 leaves MASTER_ADDR and MASTER_PORT unset (a job over
// several nodes, where rank 0's address is the user's to give).
std::vector<std::pair<std::string, std::string>> torch_variables(int rank, int ranks, int local_rank, int local_size,
                                                                 int port);

}  // namespace aperture::launcher
