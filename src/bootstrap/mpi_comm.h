// src/bootstrap/mpi_comm.h — the bootstrap's MPI communicator, typed, for code that includes
// <mpi.h> anyway (the MPI providers); bootstrap/mpi.h itself stays free of MPI's headers.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include "bootstrap/mpi.h"

namespace aperture::detail {

// MPI_COMM_WORLD's duplicate with MPI_ERRORS_RETURN, kept by the bootstrap (never free it).
inline MPI_Comm mpi_errors_return_world() {
  MPI_Comm comm = MPI_COMM_NULL;
  mpi_errors_return_world_into(&comm);
  return comm;
}

}  // namespace aperture::detail
