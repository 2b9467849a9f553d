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
// Plain MPI between two ranks, what a user would write without aperture: one window of `bytes`
// (MPI_Win_allocate, MPI_Win_lock_all) and MPI_Put/MPI_Get + MPI_Win_flush into it; and
// MPI_Sendrecv of `bytes` with `peer` (both directions at once, as every rank puts at once).
void rma_open(std::size_t bytes);
void rma_put(const void* src, std::size_t bytes, int peer);
void rma_get(void* dst, std::size_t bytes, int peer);
void rma_close();
void sendrecv(const void* in, void* out, std::size_t bytes, int peer);

}  // namespace aperture::bench::mpi
