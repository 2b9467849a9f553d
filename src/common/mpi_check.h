// src/common/mpi_check.h — MPI errors translated into aperture::Error.
//
//     APERTURE_MPI_CHECK(MPI_Barrier(comm));                                   // throws
//     std::string why = APERTURE_MPI_TRY(MPI_Win_allocate_shared(...));       // "" on success
//
// Only calls made on a communicator or window with MPI_ERRORS_RETURN come back at all (the
// default handler aborts the job); aperture sets it on its own communicators.
#pragma once

// The C API only: Open MPI's C++ bindings would need libmpi_cxx.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <string>
#include <string_view>

#include "aperture/error.h"
#include "common/call_failure.h"

namespace aperture::detail {

// MPI may be asked about an error only between MPI_Init and MPI_Finalize (Open MPI aborts the
// process otherwise); a failure outside that window is described by its number alone.
inline bool mpi_can_describe_errors() {
  int initialised = 0;
  int finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  return initialised && !finalised;
}

// "MPI_ERR_COMM: invalid communicator (MPI error 5)".
inline std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  std::string message = mpi_can_describe_errors() && MPI_Error_string(code, text, &length) == MPI_SUCCESS
                            ? std::string(text, static_cast<std::size_t>(length))
                            : std::string("unknown MPI error");
  return message + " (MPI error " + std::to_string(code) + ")";
}

// "" when `code` is MPI_SUCCESS; otherwise "<call> failed: <text> (MPI error N)".
inline std::string mpi_failure(int code, std::string_view call) {
  if (code == MPI_SUCCESS) return {};
  return call_failure_text(call, mpi_error_text(code));
}

// Throws aperture::Error("<call> failed: ...<hint>") when `code` is not MPI_SUCCESS; `hint` (with
// its leading "; ") says what to check.
inline void check_mpi(int code, std::string_view call, std::string_view hint = {}) {
  if (code == MPI_SUCCESS) return;
  ErrorCode kind = ErrorCode::system;
  int error_class = 0;
  if (mpi_can_describe_errors() && MPI_Error_class(code, &error_class) == MPI_SUCCESS && error_class == MPI_ERR_NO_MEM)
    kind = ErrorCode::out_of_memory;
  throw_call_failure(kind, call, mpi_failure(code, call) + std::string(hint));
}

}  // namespace aperture::detail

// Throws aperture::Error naming the call and MPI's account of it; the optional second argument is
// a hint appended to the message ("; check that ...").
#define APERTURE_MPI_CHECK(call, ...) ::aperture::detail::check_mpi((call), #call __VA_OPT__(, ) __VA_ARGS__)
// Evaluates to "" on success and to the failure's description otherwise; never throws.
#define APERTURE_MPI_TRY(call) ::aperture::detail::mpi_failure((call), #call)
