// bench/host/bench_mpi.cpp — Open MPI's collectives for `aperture bench` (float, sum).
#include "bench_mpi.h"

#include <string>

#include "aperture/error.h"
#include "common/mpi_check.h"  // the C bindings of MPI, and its error text

namespace aperture::bench::mpi {

namespace {
void check(int status, const char* call) {
  if (status != MPI_SUCCESS) detail::throw_call_failure(ErrorCode::system, call, detail::mpi_failure(status, call), "bench");
}
int as_int(std::size_t count) {
  if (count > 0x7fffffff) throw Error(ErrorCode::invalid_argument, "bench: count " + std::to_string(count) + " does not fit MPI's int");
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

namespace {
MPI_Win rma_window = MPI_WIN_NULL;
}  // namespace

void rma_open(std::size_t bytes) {
  void* base = nullptr;
  check(MPI_Win_allocate(static_cast<MPI_Aint>(bytes), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &rma_window),
        "MPI_Win_allocate");
  check(MPI_Win_lock_all(0, rma_window), "MPI_Win_lock_all");
}
void rma_put(const void* src, std::size_t bytes, int peer) {
  check(MPI_Put(src, as_int(bytes), MPI_BYTE, peer, 0, as_int(bytes), MPI_BYTE, rma_window), "MPI_Put");
  check(MPI_Win_flush(peer, rma_window), "MPI_Win_flush");
}
void rma_get(void* dst, std::size_t bytes, int peer) {
  check(MPI_Get(dst, as_int(bytes), MPI_BYTE, peer, 0, as_int(bytes), MPI_BYTE, rma_window), "MPI_Get");
  check(MPI_Win_flush(peer, rma_window), "MPI_Win_flush");
}
void rma_close() {
  if (rma_window == MPI_WIN_NULL) return;
  MPI_Win_unlock_all(rma_window);
  check(MPI_Win_free(&rma_window), "MPI_Win_free");
}
void sendrecv(const void* in, void* out, std::size_t bytes, int peer) {
  check(MPI_Sendrecv(in, as_int(bytes), MPI_BYTE, peer, 7, out, as_int(bytes), MPI_BYTE, peer, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE),
        "MPI_Sendrecv");
}

}  // namespace aperture::bench::mpi
