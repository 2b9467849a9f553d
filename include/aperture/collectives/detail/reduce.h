// aperture/collectives/detail/reduce.h — a group folding every rank's copy of a buffer.
//
//     reduce_peers<Op>(coop, out, local, count, me, world, peer_bases)
//         out[i] = local[i] of rank 0 (op) local[i] of rank 1 (op) ... of rank world-1
//
// Every thread of the Coop calls it with the same arguments and folds a share; on a GPU
// neighbouring threads take neighbouring 16-byte vectors, several in flight per thread
// (tuning.h). Relaxed like aperture::get: the result is complete for the group after
// coop.sync(). Accumulate<T>, Combine<Op> and Fold<Op, T> are how the element types combine.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "aperture/collectives/detail/float_formats.h"
#include "aperture/collectives/detail/partition.h"
#include "aperture/collectives/detail/tuning.h"
#include "aperture/collectives/types.h"
#include "aperture/config.h"
#include "aperture/translate.h"

#if APERTURE_HAS_CUDA_COMPILER
#  include <cuda_bf16.h>
#  include <cuda_fp16.h>
#  include <cuda_fp8.h>
#endif

namespace aperture::collectives::detail {

// The type a reduction combines in, and the rounding back to the element's width after each
// combination (NCCL's reductions round every step to the element type: float16 and bfloat16 by
// __hadd/__hmul, the 8-bit floats through float16; see bench/results/2026-12-01-cpu-2core/NOTES.md "Element types").
// Combining two 16-bit values in float and rounding once gives the correctly rounded 16-bit
// result that __hadd/__hmul give: their exact sum or product is what float holds, or so small
// a part of it is lost that it cannot move the 16-bit rounding.
template <class T>
struct Accumulate {
  using type = T;
  static constexpr bool kNarrow = false;  // type == T: nothing to round
  APERTURE_HD static T in(T v) { return v; }
  APERTURE_HD static T out(T v) { return v; }
};
// The bit forms of the narrow floats (the CPU side, float_formats.h).
template <class Bits>
struct AccumulateBits {
  using type = float;
  static constexpr bool kNarrow = true;
  APERTURE_HD static float in(Bits v) { return mini_to_float(v); }
  APERTURE_HD static Bits out(float v) {
    if constexpr (sizeof(Bits) == 1) {
      return mini_from_float<Bits>(mini_to_float(mini_from_float<Float16Bits>(v)));  // via float16, as NCCL
    } else {
      return mini_from_float<Bits>(v);
    }
  }
};
template <>
struct Accumulate<Float16Bits> : AccumulateBits<Float16Bits> {};
template <>
struct Accumulate<BFloat16Bits> : AccumulateBits<BFloat16Bits> {};
template <>
struct Accumulate<Float8E4M3Bits> : AccumulateBits<Float8E4M3Bits> {};
template <>
struct Accumulate<Float8E5M2Bits> : AccumulateBits<Float8E5M2Bits> {};
#if APERTURE_HAS_CUDA_COMPILER
template <>
struct Accumulate<__half> {
  using type = float;
  static constexpr bool kNarrow = true;
  APERTURE_HD static float in(__half v) { return __half2float(v); }
  APERTURE_HD static __half out(float v) { return __float2half_rn(v); }
};
template <>
struct Accumulate<__nv_bfloat16> {
  using type = float;
  static constexpr bool kNarrow = true;
  APERTURE_HD static float in(__nv_bfloat16 v) { return __bfloat162float(v); }
  APERTURE_HD static __nv_bfloat16 out(float v) { return __float2bfloat16_rn(v); }
};
template <__nv_fp8_interpretation_t Format, class T>
struct AccumulateFp8 {
  using type = float;
  static constexpr bool kNarrow = true;
  APERTURE_HD static float in(T v) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(v.__x, Format))); }
  APERTURE_HD static T out(float v) {
    T r;
    r.__x = __nv_cvt_halfraw_to_fp8(__half_raw(__float2half_rn(v)), __NV_SATFINITE, Format);
    return r;
  }
};
template <>
struct Accumulate<__nv_fp8_e4m3> : AccumulateFp8<__NV_E4M3, __nv_fp8_e4m3> {};
template <>
struct Accumulate<__nv_fp8_e5m2> : AccumulateFp8<__NV_E5M2, __nv_fp8_e5m2> {};
#endif

// The operation as a type, so the inner loops compile to one instruction each. Integers wrap
// (in their unsigned form: no signed overflow), as NCCL's do; avg folds as sum (Fold below
// scales before or divides after).
template <ReduceOp Op>
struct Combine {
  template <class A>
  APERTURE_HD static A apply(A a, A b) {
    if constexpr (Op == ReduceOp::sum || Op == ReduceOp::avg || Op == ReduceOp::prod) {
      if constexpr (std::is_integral_v<A>) {
        using U = std::conditional_t<(sizeof(A) < sizeof(unsigned)), unsigned, std::make_unsigned_t<A>>;
        const U r = Op == ReduceOp::prod ? static_cast<U>(static_cast<U>(a) * static_cast<U>(b))
                                         : static_cast<U>(static_cast<U>(a) + static_cast<U>(b));
        return static_cast<A>(r);
      } else {
        return Op == ReduceOp::prod ? a * b : a + b;
      }
    } else if constexpr (Op == ReduceOp::min) {
      return b < a ? b : a;
    } else {
      return a < b ? b : a;
    }
  }
};

// One element folded over the ranks in rank order: acc = first(x0), then acc = next(acc, xr) for
// r = 1 .. world-1, and the result is last(acc). Every step rounds to T's width.
template <ReduceOp Op, class T>
struct Fold {
  using A = Accumulate<T>;
  using Acc = typename A::type;
  static constexpr bool kScales = Op == ReduceOp::avg && !std::is_integral_v<Acc>;  // NCCL's pre-multiply
  static constexpr bool kDivides = Op == ReduceOp::avg && std::is_integral_v<Acc>;  // NCCL's post-divide
  Acc scale{};  // 1 / world rounded to T
  Acc world{};
  APERTURE_HD explicit Fold(int ranks) : world(static_cast<Acc>(ranks)) {
    if constexpr (kScales) scale = round(static_cast<Acc>(1) / static_cast<Acc>(ranks));
  }
  APERTURE_HD static Acc round(Acc v) {
    if constexpr (A::kNarrow) {
      return A::in(A::out(v));
    } else {
      return v;
    }
  }
  // x * scale rounded on its own, as NCCL's pre-multiply is. A plain product would let nvcc fuse
  // it with next()'s add into one FMA (one rounding fewer): an ulp off wherever 1 / world is
  // inexact (3 ranks), while 1 and 2 ranks agree either way.
  APERTURE_HD static Acc scaled(Acc v, Acc s) {
    // NOLINTNEXTLINE(bugprone-branch-clone): the branches are one product on the host, not on the device
    if constexpr (std::is_same_v<Acc, float>) {
      APERTURE_IF_DEVICE_ELSE((return __fmul_rn(v, s);), (return v * s;))
    } else if constexpr (std::is_same_v<Acc, double>) {
      APERTURE_IF_DEVICE_ELSE((return __dmul_rn(v, s);), (return v * s;))
    } else {
      return v * s;
    }
  }
  APERTURE_HD Acc first(T x) const {
    if constexpr (kScales) {
      return round(scaled(A::in(x), scale));
    } else {
      return A::in(x);
    }
  }
  APERTURE_HD Acc next(Acc acc, T x) const { return round(Combine<Op>::apply(acc, first(x))); }
  APERTURE_HD T last(Acc acc) const {
    if constexpr (kDivides) {
      return static_cast<T>(acc / world);  // rounds towards zero
    } else {
      return A::out(acc);
    }
  }
};

#if APERTURE_HAS_CUDA_COMPILER
template <ReduceOp Op, class T>
__device__ inline void device_reduce_peers(std::uint64_t thread, std::uint64_t threads, T* out, const T* local,
                                           std::uint64_t count, int me, int world, const std::int64_t* peer_bases) {
  using F = Fold<Op, T>;
  using Acc = typename F::Acc;
  const F f(world);
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
    for (std::uint64_t k = 0; k < V; ++k) r.v[k] = f.last(acc[k]);
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
        for (std::uint64_t k = 0; k < V; ++k) acc[k] = f.next(f.first(pa.v[k]), pb.v[k]);
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
            acc[u][k] = s == 0 ? f.first(p.v[k]) : f.next(acc[u][k], p.v[k]);
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
      for (std::uint64_t k = 0; k < V; ++k) acc[k] = f.first(p.v[k]);
    }
    for (int s = 1; s < world; ++s) {
      const Pack p = unpack(reinterpret_cast<const uint4*>(aperture::translate(local, me, s, peer_bases))[v]);
#pragma unroll
      for (std::uint64_t k = 0; k < V; ++k) acc[k] = f.next(acc[k], p.v[k]);
    }
    store(v, acc);
  }
  for (std::uint64_t i = vectors * V + thread; i < count; i += threads) {
    Acc acc = f.first(aperture::translate(local, me, 0, peer_bases)[i]);
    for (int s = 1; s < world; ++s) acc = f.next(acc, aperture::translate(local, me, s, peer_bases)[i]);
    out[i] = f.last(acc);
  }
}
#endif

// The CPU side: blocks small enough to stay in L1 while every rank's block is folded in. Kept
// out of line: inlined into the staged loops, GCC compiled the fold into slower code (the CPU
// one-shot all-reduce at 16-32 KiB took longer).
template <ReduceOp Op, class T>
__attribute__((noinline)) void host_reduce_peers(T* out, const T* local, std::uint64_t count, int me, int world,
                              const std::int64_t* peer_bases) {
  using F = Fold<Op, T>;
  using Acc = typename F::Acc;
  constexpr std::uint64_t kBlock = tuning::kHostReduceBlockBytes / sizeof(Acc);
  if constexpr (!F::A::kNarrow && !F::kScales && !F::kDivides) {
    // Combined in T itself: fold straight into `out`, a loop the compiler vectorises.
    for (std::uint64_t begin = 0; begin < count; begin += kBlock) {
      const std::uint64_t n = count - begin < kBlock ? count - begin : kBlock;
      T* __restrict o = out + begin;
      std::memcpy(static_cast<void*>(o), aperture::translate(local, me, 0, peer_bases) + begin, n * sizeof(T));
      for (int s = 1; s < world; ++s) {
        const T* __restrict x = aperture::translate(local, me, s, peer_bases) + begin;
        for (std::uint64_t i = 0; i < n; ++i) o[i] = Combine<Op>::apply(o[i], x[i]);
      }
    }
  } else {
    // A block of accumulators (narrow floats, avg), converted into `out` once folded.
    const F f(world);
    Acc acc[kBlock];
    for (std::uint64_t begin = 0; begin < count; begin += kBlock) {
      const std::uint64_t n = count - begin < kBlock ? count - begin : kBlock;
      const T* x = aperture::translate(local, me, 0, peer_bases) + begin;
      for (std::uint64_t i = 0; i < n; ++i) acc[i] = f.first(x[i]);
      for (int s = 1; s < world; ++s) {
        x = aperture::translate(local, me, s, peer_bases) + begin;
        for (std::uint64_t i = 0; i < n; ++i) acc[i] = f.next(acc[i], x[i]);
      }
      for (std::uint64_t i = 0; i < n; ++i) out[begin + i] = f.last(acc[i]);
    }
  }
}

// out[i] = every rank's copy of local[i], combined in rank order (Fold: at T's width).
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
         const Fold<Op, T> f(world);
         for (std::uint64_t i = g.thread_rank(); i < count; i += g.size()) {
           auto acc = f.first(aperture::translate(local, me, 0, peer_bases)[i]);
           for (int s = 1; s < world; ++s) acc = f.next(acc, aperture::translate(local, me, s, peer_bases)[i]);
           out[i] = f.last(acc);
         }
       }))
}

}  // namespace aperture::collectives::detail
