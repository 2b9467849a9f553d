// src/providers/foreign_window/backing_space.h — how much room the file system behind MPI's
// shared-memory windows has left, asked before MPI is (mpi-window).
//
// Open MPI backs every MPI_Win_allocate_shared window with a file in /dev/shm (osc/sm's
// backing directory). It refuses a window larger than the free space, but not inside the
// collective: the rank that notices returns, the others stay in MPI_Win_allocate_shared. And the
// files are sparse: a window takes space only as its pages are written, so windows that fit one
// by one can together promise more than there is, and the write that finds no page dies of
// SIGBUS. So the provider asks first, on every rank, and counts the pages its live windows have
// promised but not yet touched as taken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace aperture::detail {

struct BackingSpace {
  std::string directory;        // where the window files go: /dev/shm, or OMPI_MCA_osc_sm_backing_directory
  std::uint64_t free_bytes = 0;  // statvfs: what an unprivileged writer can still have
  std::string error;            // "" unless statvfs failed
};

BackingSpace mpi_window_backing_space();

// Bytes of [base, base + bytes) whose pages are not yet backed by memory (mincore): what a
// shared file mapping still promises. The whole range when mincore cannot tell.
std::uint64_t untouched_bytes(const void* base, std::size_t bytes);

}  // namespace aperture::detail
