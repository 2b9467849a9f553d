// src/launcher/cpu_share.h — OpenMP threads for ranks that share one machine's CPUs.
//
// PyTorch's CPU operators, like any OpenMP program, start one thread per CPU they may run on, and
// OpenMP's threads spin while they wait for each other. N ranks on one machine then run N threads
// per CPU and spend their time spinning: four processes of float64 matmuls on 16 CPUs took 64 s
// each, against 2.2 s for one alone and about 2 s each at 4 threads
// (bench/results/2026-12-07-h100-x1/run8-omp-threads-side-by-side).
// torchrun sets OMP_NUM_THREADS=1 for the same reason; `aperture launch` gives each rank an even
// share of the CPUs instead, so one rank per machine or a few per machine keep their cores busy.
// A value the user set, even "1" or a list, is left as it is.
//
// Private to src/launcher.
#pragma once

#include <optional>
#include <string>

namespace aperture::launcher {

// The CPUs this process may run on (its affinity mask, which taskset and cpusets narrow), >= 1.
int usable_cpus();

// OMP_NUM_THREADS for each of `ranks_sharing` ranks that run on `cpus` CPUs: cpus / ranks_sharing,
// at least 1. nullopt, leaving the variable as it is, when the user set it (`user_value` not null
// and not empty) or when one rank has the CPUs to itself.
std::optional<std::string> shared_omp_threads(int ranks_sharing, int cpus, const char* user_value);

}  // namespace aperture::launcher
