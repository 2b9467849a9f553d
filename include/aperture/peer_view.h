// aperture/peer_view.h — what a kernel takes instead of (rank, table) argument pairs.
//
// A PeerView is a small trivially-copyable value: the caller's rank, the world size, the
// provider's table of peer bases and the length of each rank's copy. Pass it to a kernel by value; every method is one of the free
// operations with from_rank filled in.
//
// A view whose map has an engine (aperture/engine_channel.h: MPI RMA for ranks on other nodes)
// also reaches peers whose entry is 0: each operation branches once on peer_bases[to_rank] != 0,
// and the indirect side hands the operation to the engine. The direct side is the plain
// operation, unchanged. Without an engine (engine.attached() false) indirect peers stay refused
// as on the raw-table path.
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
#include "aperture/engine_channel.h"
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
  EngineChannel engine{};  // how indirect peers are reached; empty: they are not

  APERTURE_HD bool is_direct(int peer) const { return peer >= 0 && peer < world_size && peer_bases[peer] != 0; }
  // Can an operation on `peer` be carried out, directly or through the engine?
  APERTURE_HD bool reaches(int peer) const {
    return peer >= 0 && peer < world_size && (peer_bases[peer] != 0 || engine.attached());
  }

  template <class T>
  APERTURE_HD T* translate(T* ptr, int to_rank) const {
    check(ptr, 1, to_rank);
    return aperture::translate(ptr, rank, to_rank, peer_bases);
  }
  template <class T>
  APERTURE_HD T load(const T* ptr, int to_rank) const {
    if (via_engine(to_rank)) [[unlikely]] return detail::engine_load<T>(engine, to_rank, engine_offset(ptr));
    check(ptr, 1, to_rank);
    return aperture::load(ptr, rank, to_rank, peer_bases);
  }
  template <class T>
  APERTURE_HD void store(T* ptr, T value, int to_rank) const {
    if (via_engine(to_rank)) [[unlikely]] return detail::engine_store<T>(engine, to_rank, engine_offset(ptr), value);
    check(ptr, 1, to_rank);
    aperture::store(ptr, value, rank, to_rank, peer_bases);
  }
  template <class T>
  APERTURE_HD void put(T* dst, const T* src, std::size_t count, int to_rank) const {
    if (via_engine(to_rank)) [[unlikely]]
      return detail::engine_transfer(engine, EngineOp::put, to_rank, engine_offset(dst), src, count * sizeof(T));
    check(dst, count, to_rank);
    aperture::put(dst, src, count, rank, to_rank, peer_bases);
  }
  template <class T>
  APERTURE_HD void get(T* dst, const T* src, std::size_t count, int to_rank) const {
    if (via_engine(to_rank)) [[unlikely]]
      return detail::engine_transfer(engine, EngineOp::get, to_rank, engine_offset(src), dst, count * sizeof(T));
    check(src, count, to_rank);
    aperture::get(dst, src, count, rank, to_rank, peer_bases);
  }
  // Between two peers: through the caller in pieces (get from src_rank, put to dst_rank) when
  // either is reached through the engine.
  template <class T>
  APERTURE_HD void copy(T* dst, const T* src, std::size_t count, int src_rank, int dst_rank) const {
    if (via_engine(src_rank) || via_engine(dst_rank)) [[unlikely]]
      return copy_through_caller(dst, src, count, src_rank, dst_rank);
    check(src, count, src_rank);
    check(dst, count, dst_rank);
    aperture::copy(dst, src, count, src_rank, dst_rank, rank, peer_bases);
  }

  // The atomics of aperture/atomic.h, with from_rank filled in.
// Through the engine the order is at least acq_rel: each engine operation completes before the next.
#define APERTURE_DETAIL_VIEW_ATOMIC(name, which)                                                                \
  template <class T>                                                                                        \
  APERTURE_HD T name(T* ptr, T value, int to_rank, order o = order::acq_rel, scope s = scope::system) const { \
    if (via_engine(to_rank)) [[unlikely]]                                                                   \
      return detail::engine_atomic<T>(engine, EngineOp::fetch_op, EngineAtomic::which, to_rank,               \
                                      engine_offset(ptr), value, T{});                                      \
    check(ptr, 1, to_rank);                                                                                 \
    return aperture::name(ptr, value, rank, to_rank, peer_bases, o, s);                                     \
  }
  APERTURE_DETAIL_VIEW_ATOMIC(atomic_add, add)
  APERTURE_DETAIL_VIEW_ATOMIC(atomic_sub, sub)
  APERTURE_DETAIL_VIEW_ATOMIC(atomic_and, band)
  APERTURE_DETAIL_VIEW_ATOMIC(atomic_or, bor)
  APERTURE_DETAIL_VIEW_ATOMIC(atomic_xor, bxor)
  APERTURE_DETAIL_VIEW_ATOMIC(atomic_min, min)
  APERTURE_DETAIL_VIEW_ATOMIC(atomic_max, max)
  APERTURE_DETAIL_VIEW_ATOMIC(atomic_xchg, replace)
#undef APERTURE_DETAIL_VIEW_ATOMIC

  template <class T>
  APERTURE_HD T atomic_cas(T* ptr, T expected, T desired, int to_rank, order o = order::acq_rel,
                           scope s = scope::system) const {
    if (via_engine(to_rank)) [[unlikely]]
      return detail::engine_atomic<T>(engine, EngineOp::compare_swap, EngineAtomic::replace, to_rank, engine_offset(ptr),
                                      desired, expected);
    check(ptr, 1, to_rank);
    return aperture::atomic_cas(ptr, expected, desired, rank, to_rank, peer_bases, o, s);
  }
  APERTURE_HD void signal(std::uint64_t* flag, std::uint64_t value, int to_rank) const {
    if (via_engine(to_rank)) [[unlikely]] return detail::engine_signal(engine, to_rank, engine_offset(flag), value);
    check(flag, 1, to_rank);
    aperture::signal(flag, value, rank, to_rank, peer_bases);
  }

 private:
  // The one branch the direct path pays: a load of peer_bases[to_rank] (which the translation
  // needs anyway) and a compare. A rank out of range is left to check() and the plain path.
  // (A rank out of range is the caller's error, as on the raw path; APERTURE_CHECKED catches it.)
  // The entry's test itself is marked unlikely, not only the whole condition: without it GCC 12
  // lays the direct store out as a taken jump over the engine test, a second taken branch in
  // every loop iteration, and a host loop of 1-word stores ran 1.5x the raw table's time
  // (bench/standalone/direct_path.cpp).
  APERTURE_HD bool via_engine(int to_rank) const {
    return __builtin_expect(peer_bases[to_rank] == 0, 0) && engine.host_call != nullptr;
  }
  // copy() where a side is reached through the engine: pieces through a buffer of the caller
  // (out of line: the buffer is no part of a direct copy's frame).
  template <class T>
  APERTURE_DETAIL_OUT_OF_LINE APERTURE_HD void copy_through_caller(T* dst, const T* src, std::size_t count,
                                                                   int src_rank, int dst_rank) const {
    constexpr std::size_t kPiece = 4096 / sizeof(T) > 0 ? 4096 / sizeof(T) : 1;
    T piece[kPiece];
    for (std::size_t done = 0; done < count; done += kPiece) {
      const std::size_t n = count - done < kPiece ? count - done : kPiece;
      get(piece, src + done, n, src_rank);
      put(dst + done, piece, n, dst_rank);
    }
  }
  // Bytes from the start of the peer's copy (the engine addresses memory by offset).
  APERTURE_HD std::uint64_t engine_offset(const void* ptr) const {
    return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(ptr) -
                                      static_cast<std::uintptr_t>(peer_bases[rank])) +
           engine.base_offset;
  }

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
