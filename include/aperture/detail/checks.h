// aperture/detail/checks.h — the checks APERTURE_CHECKED builds run inside device operations.
//
// A table entry of 0 means "this peer is not directly addressable" (another node, no P2P,
// shmem_ptr returned NULL). Unchecked builds trust the caller and compile to nothing here.
//
// Two levels, because a raw table does not say how many entries it has or how long each
// rank's copy is:
//   check_translation   every translation (the free functions on a raw table): the table is
//                       not null, ranks are not negative, the caller has a base, the target is
//                       direct, the pointer is not below the caller's base.
//   check_view_access   every PeerView operation, which knows the world size and (when made
//                       from a SymmetricAddressMap) the extent of each copy: both ranks are in
//                       range, the target is direct, and every byte touched lies in the
//                       caller's copy.
// A failed check throws aperture::Error ("checked access refused: <what> (<values>)") on the
// host; in a kernel it prints one line starting "aperture checked: <what>" and traps (the launch fails with cudaErrorLaunchFailure), so nothing is
// written through the bad address.
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
// What a failed check knows; -1 / 0 where it does not know.
struct CheckedAccess {
  const void* ptr = nullptr;
  std::uint64_t bytes = 0;
  int from_rank = -1;
  int to_rank = -1;
  int world_size = -1;
  std::uint64_t extent = 0;
};

APERTURE_HD void report_check_failure(const char* what, const CheckedAccess& a) {
  APERTURE_IF_DEVICE_ELSE(
      (printf("aperture checked: %s (ptr=%p bytes=%llu from_rank=%d to_rank=%d world_size=%d extent=%llu; "
              "block %d thread %d)\n",
              what, a.ptr, static_cast<unsigned long long>(a.bytes), a.from_rank, a.to_rank, a.world_size,
              static_cast<unsigned long long>(a.extent), static_cast<int>(blockIdx.x), static_cast<int>(threadIdx.x));
       APERTURE_DEVICE_TRAP();),
      (char buffer[160];
       std::snprintf(buffer, sizeof buffer, " (ptr=%p bytes=%llu from_rank=%d to_rank=%d world_size=%d extent=%llu)",
                     a.ptr, static_cast<unsigned long long>(a.bytes), a.from_rank, a.to_rank, a.world_size,
                     static_cast<unsigned long long>(a.extent));
       throw Error(ErrorCode::invalid_argument, std::string("checked access refused: ") + what + buffer);))
}
#endif

APERTURE_HD void check_translation([[maybe_unused]] const void* ptr, [[maybe_unused]] int from_rank,
                                   [[maybe_unused]] int to_rank, [[maybe_unused]] const std::int64_t* peer_bases) {
#if APERTURE_CHECKED
  const CheckedAccess a{ptr, 0, from_rank, to_rank, -1, 0};
  if (peer_bases == nullptr) report_check_failure("peer_bases is null", a);
  if (from_rank < 0 || to_rank < 0) report_check_failure("negative rank", a);
  if (peer_bases[from_rank] == 0)
    report_check_failure("from_rank has no base in this table: from_rank must be the caller's rank", a);
  if (peer_bases[to_rank] == 0) report_check_failure("to_rank is not directly addressable (table entry 0)", a);
  if (reinterpret_cast<std::uintptr_t>(ptr) < static_cast<std::uintptr_t>(peer_bases[from_rank]))
    report_check_failure("pointer lies below the allocation base of from_rank", a);
#endif
}

// `count` elements of `element_bytes` at `ptr` (valid on from_rank), about to be accessed in
// to_rank's copy. extent 0: the view does not know the copies' length; the range is not checked.
APERTURE_HD void check_view_access([[maybe_unused]] const void* ptr, [[maybe_unused]] std::uint64_t count,
                                   [[maybe_unused]] std::uint64_t element_bytes, [[maybe_unused]] int from_rank,
                                   [[maybe_unused]] int to_rank, [[maybe_unused]] int world_size,
                                   [[maybe_unused]] const std::int64_t* peer_bases,
                                   [[maybe_unused]] std::uint64_t extent) {
#if APERTURE_CHECKED
  const CheckedAccess a{ptr, count * element_bytes, from_rank, to_rank, world_size, extent};
  if (peer_bases == nullptr) report_check_failure("the view has no table (peer_bases is null)", a);
  if (from_rank < 0 || from_rank >= world_size)
    report_check_failure("the view's own rank is out of range [0, world_size)", a);
  if (to_rank < 0 || to_rank >= world_size) report_check_failure("to_rank is out of range [0, world_size)", a);
  if (peer_bases[to_rank] == 0) report_check_failure("to_rank is not directly addressable (table entry 0)", a);
  if (extent == 0) return;
  const std::uint64_t base = static_cast<std::uint64_t>(peer_bases[from_rank]);
  const std::uint64_t p = reinterpret_cast<std::uintptr_t>(ptr);
  // Compared as offsets, and the count by division: count * element_bytes may wrap.
  if (p < base || p - base > extent) report_check_failure("pointer lies outside the caller's copy of the allocation", a);
  if (element_bytes != 0 && count > (extent - (p - base)) / element_bytes)
    report_check_failure("the access runs past the end of the allocation", a);
#endif
}

}  // namespace aperture::detail
