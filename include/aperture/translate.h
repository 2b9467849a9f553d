// aperture/translate.h — the one translation every remote operation is built on.
//
// A provider owes one table: peer_bases[r] is the address, in this process, of rank r's copy of
// a symmetric allocation, and peer_bases[from_rank] is the local base. A pointer `ptr` valid in
// from_rank's address space maps to the same offset inside to_rank's copy:
//
//     remote = peer_bases[to_rank] + (ptr - peer_bases[from_rank])
//
// Because only the offset matters, views (pointers into the middle of an allocation) translate
// too, and for linear heaps one table serves every allocation of the heap.
#pragma once

#include <cstdint>

#include "aperture/config.h"
#include "aperture/detail/checks.h"

namespace aperture {

// The address in this process of to_rank's counterpart of `ptr` (which is valid on from_rank).
// Example: rank 0 writes into rank 1's copy of `buf[i]`:
//     *translate(&buf[i], /*from_rank=*/0, /*to_rank=*/1, peer_bases) = 42;
template <class T>
APERTURE_HD T* translate(T* ptr, int from_rank, int to_rank, const std::int64_t* peer_bases) {
  detail::check_translation(static_cast<const void*>(ptr), from_rank, to_rank, peer_bases);
  const std::int64_t offset = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(ptr)) - peer_bases[from_rank];
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(peer_bases[to_rank] + offset));
}

}  // namespace aperture
