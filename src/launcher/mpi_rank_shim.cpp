// src/launcher/mpi_rank_shim.cpp — `PROGRAM _mpi-rank PGID -- RANK_PROGRAM [ARGS...]` (internal):
// what mpirun starts under `aperture launch --mpi`, just before it becomes the rank's program.
// PROGRAM is whichever program called launch() (the `aperture` command, the bench).
//
// Open MPI puts every rank in a process group of its own, out of reach of the job's group and
// of the watchdog that kills it if the launcher dies. The shim moves the rank into the job's
// group PGID (same session, so it may), asks to die with mpirun (PR_SET_PDEATHSIG), and execs
// the program: the same process, so MPI never notices. mpirun is told to signal its ranks
// directly (mpirun_flags.h), since it would otherwise signal the groups they just left; mpirun
// itself stays in a group of its own (sharing one with its ranks makes it report every failure
// as status 1).
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "launcher/args.h"
#include "launcher/launch.h"

#include "cpu_share.h"
#include "mpirun_flags.h"
#include "nccl_host_id.h"
#include "node_gpus.h"
#include "node_place.h"

namespace aperture::launcher {

bool is_mpi_rank_shim(int argc, char** argv) { return argc > 1 && std::strcmp(argv[1], kMpiRankShim) == 0; }

int mpi_rank_main(int argc, char** argv) {
  if (argc < 4 || std::strcmp(argv[2], "--") != 0) {
    std::fprintf(stderr, "aperture _mpi-rank: internal command of `aperture launch --mpi`; usage: "
                         "aperture _mpi-rank PGID -- PROGRAM [ARGS...]\n");
    return kExitUsage;
  }
  const pid_t group = static_cast<pid_t>(std::strtol(argv[1], nullptr, 10));
  const pid_t mpirun = ::getppid();
  if (group > 0) ::setpgid(0, group);  // best effort: without it only the watchdog's reach shrinks
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != mpirun) return 1;  // mpirun already died
  // torchrun's variables from Open MPI's, as `aperture launch` sets them without --mpi
  // (torch_variables.h; MASTER_ADDR and MASTER_PORT came from the launcher).
  for (const auto& [torch_name, mpi_name] : {std::pair{"RANK", "OMPI_COMM_WORLD_RANK"},
                                             std::pair{"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"},
                                             std::pair{"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"},
                                             std::pair{"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}})
    if (const char* value = std::getenv(mpi_name)) ::setenv(torch_name, value, 1);
  // mpirun's local size counts every rank on this machine, simulated nodes too, and the ranks are
  // not bound (--bind-to none): they share the CPUs mpirun may use (cpu_share.h).
  if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
    if (auto threads = shared_omp_threads(static_cast<int>(std::strtol(local, nullptr, 10)), usable_cpus(),
                                          std::getenv("OMP_NUM_THREADS")))
      ::setenv("OMP_NUM_THREADS", threads->c_str(), 1);
  // Nodes split out of this machine by APERTURE_NODES (`aperture launch --mpi --nodes K` without a
  // hostfile): NCCL_HOSTID per node (nccl_host_id.h), each node's own GPUs where there is one per
  // rank (node_gpus.h), and the node's local rank and size in place of mpirun's, which count the
  // whole machine (node_place.h), as `aperture launch --nodes` sets them without --mpi: a provider
  // that refuses two ranks per GPU then asks about this node.
  const char* nodes = std::getenv("APERTURE_NODES");
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (nodes != nullptr && rank != nullptr && size != nullptr) {
    const long world = std::strtol(size, nullptr, 10), count = std::strtol(nodes, nullptr, 10),
               me = std::strtol(rank, nullptr, 10);
    if (world > 0 && world <= (1L << 24) && count > 1 && count <= world && me >= 0 && me < world) {
      const NodePlace place = node_place(static_cast<int>(me), static_cast<int>(world), static_cast<int>(count));
      if (auto host_id = nccl_host_id(place.node, std::getenv("NCCL_HOSTID")))
        ::setenv(host_id->first.c_str(), host_id->second.c_str(), 1);
      if (auto visible = node_visible_devices(static_cast<int>(me), static_cast<int>(world), place,
                                              machine_gpus(std::getenv("CUDA_VISIBLE_DEVICES"))))
        ::setenv("CUDA_VISIBLE_DEVICES", visible->c_str(), 1);
      const std::string local_rank = std::to_string(place.local_rank), local_size = std::to_string(place.local_size);
      for (const char* name : {"APERTURE_LOCAL_RANK", "LOCAL_RANK"}) ::setenv(name, local_rank.c_str(), 1);
      for (const char* name : {"APERTURE_LOCAL_SIZE", "LOCAL_WORLD_SIZE"}) ::setenv(name, local_size.c_str(), 1);
    }
  }
  ::execv(argv[3], argv + 3);
  std::fprintf(stderr, "aperture launch --mpi: cannot execute '%s': %s\n", argv[3], std::strerror(errno));
  return 127;
}

}  // namespace aperture::launcher
