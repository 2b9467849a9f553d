// aperture/peer_view.h — what a kernel takes instead of (rank, table) argument pairs.
//
// A PeerView is a small trivially-copyable value: the caller's rank, the world size, the
// provider's table of peer bases and the length of each rank's copy. Pass it to a kernel by value; every method is one of the free
// operations with from_rank filled in.
//
//     __global__ void ring(aperture::PeerView peers, float* buf, std::uint64_t* flag) {
//       const int next = (peers.rank + 1) % peers.world_size;
//       peers.store(&buf[threadIdx.x], float(peers.rank), next);
//       __syncthreads();
//       if (threadIdx.x == 0) peers.signal(flag, 1, next);
//     }
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "aperture/atomic.h"
#include "aperture/config.h"
#include "aperture/rma.h"
#include "aperture/signal.h"
#include "aperture/translate.h"

namespace aperture {

struct PeerView {
  int rank = 0;        // the caller's rank: from_rank of every operation
  int world_size = 0;  // number of ranks, i.e. entries in peer_bases
  const std::int64_t* peer_bases = nullptr;  // in the memory where the kernel runs
  // Bytes of each rank's copy of the allocation, from its base; 0 when unknown. Only
  // APERTURE_CHECKED builds read it: every access must then lie inside the caller's copy.
  std::uint64_t extent = 0;

  APERTURE_HD bool is_direct(int peer) const { return peer >= 0 && peer < world_size && peer_bases[peer] != 0; }

  template <class T>
  APERTURE_HD T* translate(T* ptr, int to_rank) const {
    check(ptr, 1, to_rank);
    return aperture::translate(ptr, rank, to_rank, peer_bases);
  }
  template <class T>
  APERTURE_HD T load(const T* ptr, int to_rank) const {
    check(ptr, 1, to_rank);
    return aperture::load(ptr, rank, to_rank, peer_bases);
  }
  template <class T>
  APERTURE_HD void store(T* ptr, T value, int to_rank) const {
    check(ptr, 1, to_rank);
    aperture::store(ptr, value, rank, to_rank, peer_bases);
  }
  template <class T>
  APERTURE_HD void put(T* dst, const T* src, std::size_t count, int to_rank) const {
    check(dst, count, to_rank);
    aperture::put(dst, src, count, rank, to_rank, peer_bases);
  }
  template <class T>
  APERTURE_HD void get(T* dst, const T* src, std::size_t count, int to_rank) const {
    check(src, count, to_rank);
    aperture::get(dst, src, count, rank, to_rank, peer_bases);
  }
  template <class T>
  APERTURE_HD void copy(T* dst, const T* src, std::size_t count, int src_rank, int dst_rank) const {
    check(src, count, src_rank);
    check(dst, count, dst_rank);
    aperture::copy(dst, src, count, src_rank, dst_rank, rank, peer_bases);
  }

  // The atomics of aperture/atomic.h, with from_rank filled in.
#define APERTURE_DETAIL_VIEW_ATOMIC(name)                                                                   \
  template <class T>                                                                                        \
  APERTURE_HD T name(T* ptr, T value, int to_rank, order o = order::acq_rel, scope s = scope::system) const { \
    check(ptr, 1, to_rank);                                                                                 \
    return aperture::name(ptr, value, rank, to_rank, peer_bases, o, s);                                     \
  }
  APERTURE_DETAIL_VIEW_ATOMIC(atomic_add)
  APERTURE_DETAIL_VIEW_ATOMIC(atomic_sub)
  APERTURE_DETAIL_VIEW_ATOMIC(atomic_and)
  APERTURE_DETAIL_VIEW_ATOMIC(atomic_or)
  APERTURE_DETAIL_VIEW_ATOMIC(atomic_xor)
  APERTURE_DETAIL_VIEW_ATOMIC(atomic_min)
  APERTURE_DETAIL_VIEW_ATOMIC(atomic_max)
  APERTURE_DETAIL_VIEW_ATOMIC(atomic_xchg)
#undef APERTURE_DETAIL_VIEW_ATOMIC

  template <class T>
  APERTURE_HD T atomic_cas(T* ptr, T expected, T desired, int to_rank, order o = order::acq_rel,
                           scope s = scope::system) const {
    check(ptr, 1, to_rank);
    return aperture::atomic_cas(ptr, expected, desired, rank, to_rank, peer_bases, o, s);
  }
  APERTURE_HD void signal(std::uint64_t* flag, std::uint64_t value, int to_rank) const {
    check(flag, 1, to_rank);
    aperture::signal(flag, value, rank, to_rank, peer_bases);
  }

 private:
  // APERTURE_CHECKED: ranks in range, the peer direct, [ptr, ptr + count) inside the caller's
  // copy (aperture/detail/checks.h). Otherwise nothing.
  template <class T>
  APERTURE_HD void check([[maybe_unused]] const T* ptr, [[maybe_unused]] std::size_t count,
                         [[maybe_unused]] int to_rank) const {
#if APERTURE_CHECKED
    detail::check_view_access(static_cast<const void*>(ptr), count, sizeof(T), rank, to_rank, world_size, peer_bases,
                              extent);
#endif
  }
};

static_assert(std::is_trivially_copyable_v<PeerView>, "PeerView is passed to kernels by value");

}  // namespace aperture
