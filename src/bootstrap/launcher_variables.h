// src/bootstrap/launcher_variables.h — the variables each launcher sets for its ranks (who am I,
// how many are we, where is the rendezvous), read strictly.
//
// Each launcher describes a rank with its own variables (which launcher it was is launched_by.h's
// business). Malformed values (RANK=abc, WORLD_SIZE=0, a rank not below the size, a bad port)
// throw aperture::Error naming the variable, its value and what it should be, instead of
// starting a job with a wrong shape.
// The lookup is a parameter so the parsers can be tested and fuzzed without touching the
// process environment.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/env.h"

namespace aperture::detail {

using EnvLookup = env::Lookup;
inline EnvLookup process_env() { return env::process(); }

// `aperture launch`: APERTURE_RANK, APERTURE_WORLD_SIZE, APERTURE_HUB, APERTURE_JOB_TOKEN.
struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  std::string hub;
  std::string token;
};
std::optional<LaunchEnv> read_launch_env(const EnvLookup& env);

// Open MPI's mpirun/oshrun: OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE.
struct MpiEnv {
  int rank = 0;
  int world_size = 1;
};
std::optional<MpiEnv> read_mpi_env(const EnvLookup& env);

// torchrun: RANK, WORLD_SIZE, LOCAL_RANK (optional), MASTER_ADDR, MASTER_PORT.
struct TorchrunEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = -1;
  std::string master_addr;
  int master_port = 0;
};
std::optional<TorchrunEnv> read_torchrun_env(const EnvLookup& env);

// Slurm's srun, one process per task: SLURM_PROCID and SLURM_STEP_NUM_TASKS (the step's tasks;
// a batch script has SLURM_PROCID and SLURM_NTASKS but no step, so it is no rank), with
// SLURM_STEP_NODELIST, SLURMD_NODENAME, SLURM_JOB_ID, SLURM_STEP_ID, SLURM_CLUSTER_NAME; PMIX_RANK
// when srun serves PMIx (`--mpi=pmix`), through which MPI_Init learns the job.
struct SrunEnv {
  int rank = 0;
  int world_size = 1;
  std::string first_node;  // the step's first node, where task 0 runs (block and cyclic layouts)
  std::string this_node;   // SLURMD_NODENAME: the node this task runs on ("" when unset)
  std::string job_id;      // SLURM_JOB_ID
  std::string step_id;     // SLURM_STEP_ID
  std::string cluster;     // SLURM_CLUSTER_NAME
  bool pmix = false;       // PMIX_RANK is set
};
std::optional<SrunEnv> read_srun_env(const EnvLookup& env);

// The first host of a Slurm host list ("gpu[07-10,12],login1" -> "gpu07"): the first name, each
// bracketed range replaced by its first number as written (leading zeros kept). Throws
// aperture::Error naming `variable` when the list is malformed.
std::string first_host_of(const char* variable, std::string_view host_list);

// The integer in variable `name`, within [min, max]; throws aperture::Error otherwise.
inline int parse_int_variable(const char* name, const char* text, long min, long max) {
  return env::parse_int(name, text, min, max);
}

}  // namespace aperture::detail
