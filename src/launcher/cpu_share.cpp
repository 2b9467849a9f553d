#include "cpu_share.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>

namespace aperture::launcher {

int usable_cpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (::sched_getaffinity(0, sizeof mask, &mask) == 0) return std::max(1, CPU_COUNT(&mask));
  return static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
}

std::optional<std::string> shared_omp_threads(int ranks_sharing, int cpus, const char* user_value) {
  if (user_value != nullptr && *user_value != '\0') return std::nullopt;
  if (ranks_sharing <= 1) return std::nullopt;
  return std::to_string(std::max(1, cpus / ranks_sharing));
}

}  // namespace aperture::launcher
