// aperture/rma.h — one-sided loads, stores and copies into other ranks' memory.
//
// Rank roles: from_rank is the caller, in whose address space every pointer argument is valid;
// to_rank is the rank whose memory is read or written. All of these are relaxed and unordered:
// order them with signal()/wait_until_ge() (aperture/signal.h) or an atomic (aperture/atomic.h).
//
// Each is a translation followed by plain memory accesses, executed by the calling thread alone.
// A warp, block or grid moving many bytes together uses the forms of aperture/coop_rma.h, which
// take a Coop (aperture/coop.h) first and split the bytes between its threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "aperture/config.h"
#include "aperture/translate.h"

namespace aperture {

namespace detail {
template <class T>
APERTURE_HD void copy_elements(T* dst, const T* src, std::size_t count) {
  APERTURE_IF_DEVICE_ELSE(
      (for (std::size_t i = 0; i < count; ++i) dst[i] = src[i];),
      (if (count != 0) std::memmove(static_cast<void*>(dst), static_cast<const void*>(src), count * sizeof(T));))
}
}  // namespace detail

// Reads to_rank's copy of *ptr.
template <class T>
APERTURE_HD T load(const T* ptr, int from_rank, int to_rank, const std::int64_t* peer_bases) {
  return *translate(ptr, from_rank, to_rank, peer_bases);
}

// Writes `value` into to_rank's copy of *ptr.
template <class T>
APERTURE_HD void store(T* ptr, T value, int from_rank, int to_rank, const std::int64_t* peer_bases) {
  *translate(ptr, from_rank, to_rank, peer_bases) = value;
}

// Copies `count` elements from the caller's `src` into to_rank's copy of `dst`.
template <class T>
APERTURE_HD void put(T* dst, const T* src, std::size_t count, int from_rank, int to_rank,
                     const std::int64_t* peer_bases) {
  detail::copy_elements(translate(dst, from_rank, to_rank, peer_bases), src, count);
}

// Copies `count` elements from to_rank's copy of `src` into the caller's `dst`.
template <class T>
APERTURE_HD void get(T* dst, const T* src, std::size_t count, int from_rank, int to_rank,
                     const std::int64_t* peer_bases) {
  detail::copy_elements(dst, translate(src, from_rank, to_rank, peer_bases), count);
}

// Copies `count` elements from src_rank's copy of `src` into dst_rank's copy of `dst`; both
// pointers are given in cur_rank's (the caller's) address space. Either side may be the caller.
template <class T>
APERTURE_HD void copy(T* dst, const T* src, std::size_t count, int src_rank, int dst_rank, int cur_rank,
                      const std::int64_t* peer_bases) {
  detail::copy_elements(translate(dst, cur_rank, dst_rank, peer_bases), translate(src, cur_rank, src_rank, peer_bases),
                        count);
}

}  // namespace aperture
