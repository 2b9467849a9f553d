// aperture/detail/checks.h — the checks APERTURE_CHECKED builds run inside device operations.
//
// A table entry of 0 means "this peer is not directly addressable" (another node, no P2P,
// shmem_ptr returned NULL). Unchecked builds trust the caller and compile to nothing here.
#pragma once

#include <cstdint>

#include "aperture/config.h"

#if APERTURE_CHECKED
#  include <cstdio>
#  include <string>
#  include "aperture/error.h"
#endif

namespace aperture::detail {

#if APERTURE_CHECKED
APERTURE_HD void report_check_failure(const char* what, const void* ptr, int from_rank, int to_rank) {
  APERTURE_IF_DEVICE_ELSE(
      (printf("aperture checked: %s (ptr=%p from_rank=%d to_rank=%d)\n", what, ptr, from_rank, to_rank);
       __trap();),
      (char buffer[96];
       std::snprintf(buffer, sizeof buffer, " (ptr=%p from_rank=%d to_rank=%d)", ptr, from_rank, to_rank);
       throw Error(std::string("checked translate: ") + what + buffer);))
}
#endif

APERTURE_HD void check_translation([[maybe_unused]] const void* ptr, [[maybe_unused]] int from_rank,
                                   [[maybe_unused]] int to_rank, [[maybe_unused]] const std::int64_t* peer_bases) {
#if APERTURE_CHECKED
  if (peer_bases == nullptr) report_check_failure("peer_bases is null", ptr, from_rank, to_rank);
  if (from_rank < 0 || to_rank < 0) report_check_failure("negative rank", ptr, from_rank, to_rank);
  if (peer_bases[from_rank] == 0)
    report_check_failure("from_rank has no base in this table: from_rank must be the caller's rank", ptr, from_rank, to_rank);
  if (peer_bases[to_rank] == 0)
    report_check_failure("to_rank is not directly addressable (table entry 0)", ptr, from_rank, to_rank);
  if (reinterpret_cast<std::uintptr_t>(ptr) < static_cast<std::uintptr_t>(peer_bases[from_rank]))
    report_check_failure("pointer lies below the allocation base of from_rank", ptr, from_rank, to_rank);
#endif
}

}  // namespace aperture::detail
