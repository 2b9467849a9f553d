// aperture/coop_rma.h — put, get, copy, signal and wait by a group of threads together.
//
// The group-cooperative forms of aperture/rma.h and aperture/signal.h: the first argument is a
// Coop (aperture/coop.h), and EVERY thread of it calls the operation with the same arguments.
// Rank roles are rma.h's: from_rank is the caller, in whose address space every pointer is
// valid; to_rank the rank whose memory is read or written.
//
//   copy(coop, dst, src, count)                                  local (or already translated) memory
//   put (coop, dst, src, count, from_rank, to_rank, peer_bases)  caller's src -> to_rank's dst
//   get (coop, dst, src, count, from_rank, to_rank, peer_bases)  to_rank's src -> caller's dst
//   copy(coop, dst, src, count, src_rank, dst_rank, cur_rank, peer_bases)   src_rank's -> dst_rank's
//       Each thread moves a share. On a GPU neighbouring threads take neighbouring 16-byte
//       vectors (one ld/st.v4 each, four in flight per thread), with byte-wise heads and tails
//       when the pointers are not 16-byte aligned alike; on a CPU thread each is one memmove.
//       Relaxed and unordered, like put/get: complete for the group after coop.sync(), visible
//       to other ranks after signal(coop, ...) below. Every Coop, CoopGrid included.
//
//   signal(coop, flag, value, from_rank, to_rank, peer_bases)
//       coop.sync(), then thread 0 fences (coop.fence()) and signals (a release store at
//       system scope): everything any thread of the group wrote before the call is visible to
//       a peer whose wait saw the value. Not for CoopGrid (no sync).
//   wait_until_ge_for(coop, local_flag, value, timeout_ns) -> bool
//       thread 0 waits (acquire, system scope) until the caller's *local_flag >= value, then
//       the group joins (coop.all): true on every thread when it got there, false on every
//       thread when the wait gave up (device). A CoopHost throws aperture::Error on timeout
//       (timeout_ns 0: APERTURE_TIMEOUT). Not for CoopGrid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "aperture/config.h"
#include "aperture/coop.h"
#include "aperture/signal.h"
#include "aperture/translate.h"

namespace aperture {

namespace detail {

inline constexpr std::uint64_t kVectorBytes = 16;

#if APERTURE_HAS_DEVICE_COMPILER
__device__ inline void coop_copy_bytes(std::uint64_t thread, std::uint64_t threads, unsigned char* dst,
                                       const unsigned char* src, std::uint64_t bytes) {
  const std::uint64_t misalign = reinterpret_cast<std::uintptr_t>(dst) % kVectorBytes;
  if (reinterpret_cast<std::uintptr_t>(src) % kVectorBytes != misalign) {
    for (std::uint64_t i = thread; i < bytes; i += threads) dst[i] = src[i];
    return;
  }
  std::uint64_t head = misalign == 0 ? 0 : kVectorBytes - misalign;
  if (head > bytes) head = bytes;
  for (std::uint64_t i = thread; i < head; i += threads) dst[i] = src[i];
  dst += head;
  src += head;
  bytes -= head;
  const std::uint64_t vectors = bytes / kVectorBytes;
  auto* d = reinterpret_cast<uint4*>(dst);
  const auto* s = reinterpret_cast<const uint4*>(src);
  std::uint64_t i = thread;
  for (; i + 3 * threads < vectors; i += 4 * threads) {  // four loads in flight before the stores
    const uint4 a = s[i], b = s[i + threads], c = s[i + 2 * threads], e = s[i + 3 * threads];
    d[i] = a;
    d[i + threads] = b;
    d[i + 2 * threads] = c;
    d[i + 3 * threads] = e;
  }
  for (; i < vectors; i += threads) d[i] = s[i];
  for (std::uint64_t t = vectors * kVectorBytes + thread; t < bytes; t += threads) dst[t] = src[t];
}
#endif

template <class Coop>
using if_coop = std::enable_if_t<is_coop_v<Coop>, int>;
template <class Coop>
using if_coop_syncs = std::enable_if_t<can_sync_v<Coop>, int>;

}  // namespace detail

template <class Coop, class T, detail::if_coop<Coop> = 0>
APERTURE_HD void copy(const Coop& coop, T* dst, const T* src, std::size_t count) {
  APERTURE_IF_DEVICE_ELSE(
      (detail::coop_copy_bytes(coop.thread_rank(), coop.size(), reinterpret_cast<unsigned char*>(dst),
                               reinterpret_cast<const unsigned char*>(src), count * sizeof(T));),
      (if (coop.size() == 1) {
         if (count != 0 && dst != src) std::memmove(static_cast<void*>(dst), static_cast<const void*>(src), count * sizeof(T));
       } else {
         for (std::size_t i = coop.thread_rank(); i < count; i += coop.size()) dst[i] = src[i];
       }))
}

template <class Coop, class T, detail::if_coop<Coop> = 0>
APERTURE_HD void put(const Coop& coop, T* dst, const T* src, std::size_t count, int from_rank, int to_rank,
                     const std::int64_t* peer_bases) {
  copy(coop, translate(dst, from_rank, to_rank, peer_bases), src, count);
}

template <class Coop, class T, detail::if_coop<Coop> = 0>
APERTURE_HD void get(const Coop& coop, T* dst, const T* src, std::size_t count, int from_rank, int to_rank,
                     const std::int64_t* peer_bases) {
  copy(coop, dst, translate(src, from_rank, to_rank, peer_bases), count);
}

template <class Coop, class T, detail::if_coop<Coop> = 0>
APERTURE_HD void copy(const Coop& coop, T* dst, const T* src, std::size_t count, int src_rank, int dst_rank,
                      int cur_rank, const std::int64_t* peer_bases) {
  copy(coop, translate(dst, cur_rank, dst_rank, peer_bases), translate(src, cur_rank, src_rank, peer_bases), count);
}

template <class Coop, detail::if_coop_syncs<Coop> = 0>
APERTURE_HD void signal(const Coop& coop, std::uint64_t* flag, std::uint64_t value, int from_rank, int to_rank,
                        const std::int64_t* peer_bases) {
  coop.sync();
  if (coop.thread_rank() == 0) {
    coop.fence();
    signal(flag, value, from_rank, to_rank, peer_bases);
  }
}

template <class Coop, detail::if_coop_syncs<Coop> = 0>
APERTURE_HD bool wait_until_ge_for(const Coop& coop, const std::uint64_t* local_flag, std::uint64_t value,
                                   std::uint64_t timeout_ns) {
  bool ok = true;
  if (coop.thread_rank() == 0) ok = coop.wait(local_flag, value, timeout_ns);
  return coop.all(ok);
}

}  // namespace aperture
