// aperture/collectives/detail/reduce.h — a group folding every rank's copy of a buffer.
//
//     reduce_peers<Op>(coop, out, local, count, me, world, peer_bases)
//         out[i] = local[i] of rank 0 (op) local[i] of rank 1 (op) ... of rank world-1
//
// Every thread of the Coop calls it with the same arguments and folds a share; on a GPU
// neighbouring threads take neighbouring 16-byte vectors, several in flight per thread
// (tuning.h). Relaxed like aperture::get: the result is complete for the group after
// coop.sync(). Accumulate<T> and Combine<Op> are how the element types combine.
#pragma once

#include <cstdint>
#include <cstring>

#include "aperture/collectives/detail/partition.h"
#include "aperture/collectives/detail/tuning.h"
#include "aperture/collectives/types.h"
#include "aperture/config.h"
#include "aperture/translate.h"

#if APERTURE_HAS_CUDA_COMPILER
#  include <cuda_bf16.h>
#  include <cuda_fp16.h>
#endif

namespace aperture::collectives::detail {

// The type a reduction combines in: T itself, float for the 16-bit floats.
template <class T>
struct Accumulate {
  using type = T;
  APERTURE_HD static T in(T v) { return v; }
  APERTURE_HD static T out(T v) { return v; }
};
#if APERTURE_HAS_CUDA_COMPILER
template <>
struct Accumulate<__half> {
  using type = float;
  APERTURE_HD static float in(__half v) { return __half2float(v); }
  APERTURE_HD static __half out(float v) { return __float2half_rn(v); }
};
template <>
struct Accumulate<__nv_bfloat16> {
  using type = float;
  APERTURE_HD static float in(__nv_bfloat16 v) { return __bfloat162float(v); }
  APERTURE_HD static __nv_bfloat16 out(float v) { return __float2bfloat16_rn(v); }
};
#endif

// The operation as a type, so the inner loops compile to one instruction each.
template <ReduceOp Op>
struct Combine {
  template <class A>
  APERTURE_HD static A apply(A a, A b) {
    if constexpr (Op == ReduceOp::sum) {
      return a + b;
    } else if constexpr (Op == ReduceOp::min) {
      return b < a ? b : a;
    } else {
      return a < b ? b : a;
    }
  }
};

#if APERTURE_HAS_CUDA_COMPILER
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
  const bool vector_out = reinterpret_cast<std::uintptr_t>(out) % aperture::detail::kVectorBytes == 0 &&
                          reinterpret_cast<std::uintptr_t>(local) % aperture::detail::kVectorBytes == 0;
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
  constexpr int kUnroll = tuning::kReduceUnroll<T>;
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
    constexpr int kUnrollAny = tuning::kReduceUnrollAnyWorld;  // world x this many loads in flight
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

// The CPU side: blocks small enough to stay in L1 while every rank's block is folded in. Kept
// out of line: inlined into the staged loops, GCC compiled the fold into slower code (the CPU
// one-shot all-reduce at 16-32 KiB took longer).
template <ReduceOp Op, class T>
__attribute__((noinline)) void host_reduce_peers(T* out, const T* local, std::uint64_t count, int me, int world,
                              const std::int64_t* peer_bases) {
  constexpr std::uint64_t kBlock = tuning::kHostReduceBlockBytes / sizeof(T);
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

// out[i] = every rank's copy of local[i], combined in rank order (16-bit floats in float).
// `local` is a pointer into the caller's copy of a symmetric allocation; `out` any memory the
// group can write that is not one of those copies.
template <ReduceOp Op, class Coop, class T>
APERTURE_HD void reduce_peers(const Coop& g, T* out, const T* local, std::uint64_t count, int me, int world,
                              const std::int64_t* peer_bases) {
  APERTURE_IF_DEVICE_ELSE(
      (device_reduce_peers<Op>(g.thread_rank(), g.size(), out, local, count, me, world, peer_bases);),
      (if (g.size() == 1) {
         host_reduce_peers<Op>(out, local, count, me, world, peer_bases);
       } else {
         for (std::uint64_t i = g.thread_rank(); i < count; i += g.size()) {
           T acc = aperture::translate(local, me, 0, peer_bases)[i];
           for (int s = 1; s < world; ++s) acc = Combine<Op>::apply(acc, aperture::translate(local, me, s, peer_bases)[i]);
           out[i] = acc;
         }
       }))
}

}  // namespace aperture::collectives::detail
