#include "providers/foreign_window/backing_space.h"

#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/env.h"
#include "common/format.h"

namespace aperture::detail {

BackingSpace mpi_window_backing_space() {
  BackingSpace space;
  // Open MPI's osc/sm takes its directory from this MCA parameter (default /dev/shm on Linux).
  const char* configured = std::getenv("OMPI_MCA_osc_sm_backing_directory");
  space.directory = configured != nullptr && *configured != '\0' ? configured : "/dev/shm";
  struct statvfs fs {};
  if (::statvfs(space.directory.c_str(), &fs) != 0) {
    space.error = detail::format("statvfs({}) failed: {} (errno {})", space.directory, std::strerror(errno), errno);
    return space;
  }
  space.free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  return space;
}

std::uint64_t untouched_bytes(const void* base, std::size_t bytes) {
  if (base == nullptr || bytes == 0) return 0;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<std::uintptr_t>(base) / page * page;
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(base) + bytes + page - 1) / page * page;
  std::vector<unsigned char> resident((end - start) / page);
  if (::mincore(reinterpret_cast<void*>(start), end - start, resident.data()) != 0) return bytes;
  std::uint64_t untouched = 0;
  for (unsigned char r : resident)
    if ((r & 1) == 0) untouched += page;
  return std::min<std::uint64_t>(untouched, bytes);
}

}  // namespace aperture::detail
