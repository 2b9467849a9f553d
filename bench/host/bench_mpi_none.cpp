// bench/host/bench_mpi_none.cpp — `aperture bench` in a build without MPI: no MPI columns.
#include "bench_mpi.h"

#include "aperture/error.h"

namespace aperture::bench::mpi {

bool ready() { return false; }
std::string why_not() { return "aperture was built without MPI (install libopenmpi-dev and reconfigure)"; }
void barrier() { throw Error("bench: built without MPI"); }
void bcast(void*, std::size_t, int) { throw Error("bench: built without MPI"); }
void allgather(const void*, void*, std::size_t) { throw Error("bench: built without MPI"); }
void alltoall(const void*, void*, std::size_t) { throw Error("bench: built without MPI"); }
void reduce_scatter_block(const void*, void*, std::size_t) { throw Error("bench: built without MPI"); }
void allreduce(const void*, void*, std::size_t) { throw Error("bench: built without MPI"); }

void rma_open(std::size_t) { throw Error("bench: built without MPI"); }
void rma_put(const void*, std::size_t, int) { throw Error("bench: built without MPI"); }
void rma_get(void*, std::size_t, int) { throw Error("bench: built without MPI"); }
void rma_close() {}
void sendrecv(const void*, void*, std::size_t, int) { throw Error("bench: built without MPI"); }

}  // namespace aperture::bench::mpi
