// bench/host/bench_mpi_none.cpp — `aperture bench` in a build without MPI: no MPI columns.
#include "bench_mpi.h"

#include "aperture/error.h"

namespace aperture::bench::mpi {

bool ready() { return false; }
std::string why_not() { return "aperture was built without MPI (install libopenmpi-dev and reconfigure)"; }
void barrier() { throw Error(ErrorCode::unavailable, "bench: built without MPI; rebuild with MPI found to compare against it"); }
void bcast(void*, std::size_t, int) { throw Error(ErrorCode::unavailable, "bench: built without MPI; rebuild with MPI found to compare against it"); }
void allgather(const void*, void*, std::size_t) { throw Error(ErrorCode::unavailable, "bench: built without MPI; rebuild with MPI found to compare against it"); }
void alltoall(const void*, void*, std::size_t) { throw Error(ErrorCode::unavailable, "bench: built without MPI; rebuild with MPI found to compare against it"); }
void reduce_scatter_block(const void*, void*, std::size_t) { throw Error(ErrorCode::unavailable, "bench: built without MPI; rebuild with MPI found to compare against it"); }
void allreduce(const void*, void*, std::size_t) { throw Error(ErrorCode::unavailable, "bench: built without MPI; rebuild with MPI found to compare against it"); }

void rma_open(std::size_t) { throw Error(ErrorCode::unavailable, "bench: built without MPI; rebuild with MPI found to compare against it"); }
void rma_put(const void*, std::size_t, int) { throw Error(ErrorCode::unavailable, "bench: built without MPI; rebuild with MPI found to compare against it"); }
void rma_get(void*, std::size_t, int) { throw Error(ErrorCode::unavailable, "bench: built without MPI; rebuild with MPI found to compare against it"); }
void rma_close() {}
void sendrecv(const void*, void*, std::size_t, int) { throw Error(ErrorCode::unavailable, "bench: built without MPI; rebuild with MPI found to compare against it"); }

}  // namespace aperture::bench::mpi
