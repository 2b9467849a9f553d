// bench/host/bench_mpi.h — the Open MPI side of `aperture bench` (bench_mpi.cpp with MPI, else
// bench_mpi_none.cpp). MPI is usable when this process was started by mpirun: Team::from_env()
// has initialised it then.
#pragma once

#include <cstddef>
#include <string>

namespace aperture::bench::mpi {

bool ready();            // MPI initialised and its world is the team
void barrier();
std::string why_not();   // when !ready()
// Element type: MPI_FLOAT. Counts as for MPI; the buffers are the caller's.
void bcast(void* buf, std::size_t count, int root);
void allgather(const void* in, void* out, std::size_t count);
void alltoall(const void* in, void* out, std::size_t count);
void reduce_scatter_block(const void* in, void* out, std::size_t count);
void allreduce(const void* in, void* out, std::size_t count);

}  // namespace aperture::bench::mpi
