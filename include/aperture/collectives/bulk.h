// aperture/collectives/bulk.h — a group moving or reducing many bytes together.
//
// Group-cooperative versions of put/get/copy (aperture/rma.h): every thread of the Group
// (aperture/collectives/group.h) calls them with the same arguments and moves a share. On a GPU
// neighbouring threads take neighbouring 16-byte vectors (one ld/st.v4 each, four in flight per
// thread), with byte-wise heads and tails when the pointers are not 16-byte aligned alike; on a
// CPU thread each is one memcpy.
//
// They are relaxed and unordered like put/get: the group's writes are complete for the group
// after g.sync(), and visible to other ranks after g.sync(), g.fence() and a signal() (which is
// what the barrier of aperture/collectives/barrier.h does).
//
//     group_copy(g, dst, src, count)                              local (or already translated) memory
//     group_put(g, dst, src, count, from_rank, to_rank, peer_bases)   caller's src -> to_rank's dst
//     group_get(g, dst, src, count, from_rank, to_rank, peer_bases)   to_rank's src -> caller's dst
//     group_reduce_peers<Op>(g, out, local, count, me, world, peer_bases)
//         out[i] = local[i] of rank 0 (op) local[i] of rank 1 (op) ... of rank world-1
#pragma once

#include <cstdint>
#include <cstring>

#include "aperture/collectives/types.h"
#include "aperture/config.h"
#include "aperture/translate.h"

namespace aperture::collectives {

inline constexpr std::uint64_t kVectorBytes = 16;
// Elements per 16-byte vector; work is split between groups and chunks in multiples of it, so
// every piece of staging memory stays 16-byte aligned.
template <class T>
inline constexpr std::uint64_t kVectorElements = sizeof(T) >= kVectorBytes ? 1 : kVectorBytes / sizeof(T);

namespace detail {

#if APERTURE_HAS_CUDA_COMPILER
__device__ inline void device_copy_bytes(std::uint64_t thread, std::uint64_t threads, unsigned char* dst,
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

template <ReduceOp Op, class T>
__device__ inline void device_reduce_peers(std::uint64_t thread, std::uint64_t threads, T* out, const T* local,
                                           std::uint64_t count, int me, int world, const std::int64_t* peer_bases) {
  using A = Accumulate<T>;
  using Acc = typename A::type;
  constexpr std::uint64_t V = kVectorElements<T>;
  struct alignas(16) Pack {
    T v[V];
  };
  // `local` is staging memory (16-byte aligned); `out` is the caller's and may not be.
  const bool vector_out = reinterpret_cast<std::uintptr_t>(out) % kVectorBytes == 0 &&
                          reinterpret_cast<std::uintptr_t>(local) % kVectorBytes == 0;
  const std::uint64_t vectors = vector_out ? count / V : 0;
  const auto unpack = [](const uint4& raw) {
    Pack p;
    memcpy(&p, &raw, sizeof raw);
    return p;
  };
  const auto store = [&](std::uint64_t v, const Acc (&acc)[V]) {
    Pack r;
#pragma unroll
    for (std::uint64_t k = 0; k < V; ++k) r.v[k] = A::out(acc[k]);
    uint4 raw;
    memcpy(&raw, &r, sizeof raw);
    reinterpret_cast<uint4*>(out)[v] = raw;
  };
  std::uint64_t v = thread;
  // Bytes in flight hide NVLink's latency: kUnroll vectors per thread per rank, and at two ranks
  // both ranks' loads issued before any is used (rank order of the fold is kept either way).
  constexpr int kUnroll = sizeof(T) <= 2 ? 4 : 2;  // more for 32-bit types spills at 128 registers
  if (world == 2) {
    const auto* a = reinterpret_cast<const uint4*>(aperture::translate(local, me, 0, peer_bases));
    const auto* b = reinterpret_cast<const uint4*>(aperture::translate(local, me, 1, peer_bases));
    for (; v + (kUnroll - 1) * threads < vectors; v += kUnroll * threads) {
      uint4 ra[kUnroll], rb[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        ra[u] = a[v + u * threads];
        rb[u] = b[v + u * threads];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const Pack pa = unpack(ra[u]), pb = unpack(rb[u]);
        Acc acc[V];
#pragma unroll
        for (std::uint64_t k = 0; k < V; ++k) acc[k] = Combine<Op>::apply(A::in(pa.v[k]), A::in(pb.v[k]));
        store(v + u * threads, acc);
      }
    }
  } else {
    constexpr int kUnrollAny = 2;  // world x kUnrollAny loads in flight; registers stay within 64
    for (; v + (kUnrollAny - 1) * threads < vectors; v += kUnrollAny * threads) {
      Acc acc[kUnrollAny][V];
      for (int s = 0; s < world; ++s) {
        const auto* src = reinterpret_cast<const uint4*>(aperture::translate(local, me, s, peer_bases));
        uint4 raw[kUnrollAny];
#pragma unroll
        for (int u = 0; u < kUnrollAny; ++u) raw[u] = src[v + u * threads];
#pragma unroll
        for (int u = 0; u < kUnrollAny; ++u) {
          const Pack p = unpack(raw[u]);
#pragma unroll
          for (std::uint64_t k = 0; k < V; ++k)
            acc[u][k] = s == 0 ? A::in(p.v[k]) : Combine<Op>::apply(acc[u][k], A::in(p.v[k]));
        }
      }
#pragma unroll
      for (int u = 0; u < kUnrollAny; ++u) store(v + u * threads, acc[u]);
    }
  }
  for (; v < vectors; v += threads) {
    Acc acc[V];
    {
      const Pack p = unpack(reinterpret_cast<const uint4*>(aperture::translate(local, me, 0, peer_bases))[v]);
#pragma unroll
      for (std::uint64_t k = 0; k < V; ++k) acc[k] = A::in(p.v[k]);
    }
    for (int s = 1; s < world; ++s) {
      const Pack p = unpack(reinterpret_cast<const uint4*>(aperture::translate(local, me, s, peer_bases))[v]);
#pragma unroll
      for (std::uint64_t k = 0; k < V; ++k) acc[k] = Combine<Op>::apply(acc[k], A::in(p.v[k]));
    }
    store(v, acc);
  }
  for (std::uint64_t i = vectors * V + thread; i < count; i += threads) {
    Acc acc = A::in(aperture::translate(local, me, 0, peer_bases)[i]);
    for (int s = 1; s < world; ++s) acc = Combine<Op>::apply(acc, A::in(aperture::translate(local, me, s, peer_bases)[i]));
    out[i] = A::out(acc);
  }
}
#endif

// The CPU side: blocks small enough to stay in L1 while every rank's block is folded in.
template <ReduceOp Op, class T>
inline void host_reduce_peers(T* out, const T* local, std::uint64_t count, int me, int world,
                              const std::int64_t* peer_bases) {
  constexpr std::uint64_t kBlock = 8192 / sizeof(T);
  for (std::uint64_t begin = 0; begin < count; begin += kBlock) {
    const std::uint64_t n = count - begin < kBlock ? count - begin : kBlock;
    T* __restrict o = out + begin;
    std::memcpy(static_cast<void*>(o), aperture::translate(local, me, 0, peer_bases) + begin, n * sizeof(T));
    for (int s = 1; s < world; ++s) {
      const T* __restrict x = aperture::translate(local, me, s, peer_bases) + begin;
      for (std::uint64_t i = 0; i < n; ++i) o[i] = Combine<Op>::apply(o[i], x[i]);
    }
  }
}

}  // namespace detail

template <class Group, class T>
APERTURE_HD void group_copy(const Group& g, T* dst, const T* src, std::uint64_t count) {
  APERTURE_IF_DEVICE_ELSE(
      (detail::device_copy_bytes(g.thread(), g.threads(), reinterpret_cast<unsigned char*>(dst),
                                 reinterpret_cast<const unsigned char*>(src), count * sizeof(T));),
      (if (g.threads() == 1) {
         if (count != 0 && dst != src) std::memmove(static_cast<void*>(dst), static_cast<const void*>(src), count * sizeof(T));
       } else {
         for (std::uint64_t i = g.thread(); i < count; i += g.threads()) dst[i] = src[i];
       }))
}

// Caller's [src, src + count) into to_rank's copy of dst.
template <class Group, class T>
APERTURE_HD void group_put(const Group& g, T* dst, const T* src, std::uint64_t count, int from_rank, int to_rank,
                           const std::int64_t* peer_bases) {
  group_copy(g, aperture::translate(dst, from_rank, to_rank, peer_bases), src, count);
}

// to_rank's copy of [src, src + count) into the caller's dst.
template <class Group, class T>
APERTURE_HD void group_get(const Group& g, T* dst, const T* src, std::uint64_t count, int from_rank, int to_rank,
                           const std::int64_t* peer_bases) {
  group_copy(g, dst, aperture::translate(src, from_rank, to_rank, peer_bases), count);
}

// out[i] = every rank's copy of local[i], combined in rank order (16-bit floats in float).
// `local` is a pointer into the caller's copy of a symmetric allocation; `out` any memory the
// group can write that is not one of those copies.
template <ReduceOp Op, class Group, class T>
APERTURE_HD void group_reduce_peers(const Group& g, T* out, const T* local, std::uint64_t count, int me, int world,
                                    const std::int64_t* peer_bases) {
  APERTURE_IF_DEVICE_ELSE(
      (detail::device_reduce_peers<Op>(g.thread(), g.threads(), out, local, count, me, world, peer_bases);),
      (if (g.threads() == 1) {
         detail::host_reduce_peers<Op>(out, local, count, me, world, peer_bases);
       } else {
         for (std::uint64_t i = g.thread(); i < count; i += g.threads()) {
           T acc = aperture::translate(local, me, 0, peer_bases)[i];
           for (int s = 1; s < world; ++s) acc = Combine<Op>::apply(acc, aperture::translate(local, me, s, peer_bases)[i]);
           out[i] = acc;
         }
       }))
}

}  // namespace aperture::collectives
