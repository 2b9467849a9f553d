// src/bootstrap/mpi.h — the little MPI a Team needs under mpirun/oshrun (built with MPI only).
//
// MPI only bootstraps: rank 0 starts the TCP hub and broadcasts its address and job token;
// every collective after that goes through the hub, so timeouts, dead-rank reports and mismatch
// checks are the same under every launcher.
#pragma once

#include <string>

namespace aperture::detail {

struct MpiWorld {
  int rank = 0;
  int size = 1;
};

// Initialises MPI (MPI_THREAD_MULTIPLE if we are first) unless the program already did, and
// arranges MPI_Finalize at exit if we initialised it. Returns MPI_COMM_WORLD's rank and size.
MpiWorld mpi_world();
// Rank 0's `value` on every rank (MPI_Bcast over MPI_COMM_WORLD).
std::string mpi_broadcast_from_rank0(const std::string& value);
// True when MPI is initialised and not finalised in this process.
bool mpi_is_active();
// The bootstrap's own duplicate of MPI_COMM_WORLD, with MPI_ERRORS_RETURN (made on first use;
// MPI must be active): what providers split their communicators from, so that a failed MPI call
// comes back as a code instead of aborting the job. Written to `comm_out`, an MPI_Comm*, typed by
// bootstrap/mpi_comm.h (this header stays free of <mpi.h>).
void mpi_errors_return_world_into(void* comm_out);

}  // namespace aperture::detail
