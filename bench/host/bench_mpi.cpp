// bench/host/bench_mpi.cpp — Open MPI's collectives for `aperture bench` (float, sum).
#include "bench_mpi.h"

// The C bindings only: Open MPI's C++ ones need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <string>

#include "aperture/error.h"

namespace aperture::bench::mpi {

namespace {
void check(int status, const char* call) {
  if (status != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(status, text, &length);
    throw Error(std::string("bench: ") + call + " failed: " + std::string(text, static_cast<std::size_t>(length)));
  }
}
int as_int(std::size_t count) {
  if (count > 0x7fffffff) throw Error("bench: count " + std::to_string(count) + " does not fit MPI's int");
  return static_cast<int>(count);
}
}  // namespace

bool ready() {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  return initialised && !finalised;
}

std::string why_not() {
  return "MPI is not initialised in this process: start the ranks with mpirun (`aperture launch --mpi`, or "
         "`aperture bench` without --no-mpi)";
}

void barrier() { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
void bcast(void* buf, std::size_t count, int root) {
  check(MPI_Bcast(buf, as_int(count), MPI_FLOAT, root, MPI_COMM_WORLD), "MPI_Bcast");
}
void allgather(const void* in, void* out, std::size_t count) {
  check(MPI_Allgather(in, as_int(count), MPI_FLOAT, out, as_int(count), MPI_FLOAT, MPI_COMM_WORLD), "MPI_Allgather");
}
void alltoall(const void* in, void* out, std::size_t count) {
  check(MPI_Alltoall(in, as_int(count), MPI_FLOAT, out, as_int(count), MPI_FLOAT, MPI_COMM_WORLD), "MPI_Alltoall");
}
void reduce_scatter_block(const void* in, void* out, std::size_t count) {
  check(MPI_Reduce_scatter_block(in, out, as_int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Reduce_scatter_block");
}
void allreduce(const void* in, void* out, std::size_t count) {
  check(MPI_Allreduce(in, out, as_int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
}

}  // namespace aperture::bench::mpi
