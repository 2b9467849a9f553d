// aperture/atomic.h — atomic read-modify-write operations on other ranks' memory.
//
// Every operation translates `ptr` (valid on from_rank, the caller) to to_rank's copy and
// applies the operation there, returning the old value. Ordering and scope follow
// cuda::atomic_ref on the device and std::atomic_ref on the host; the defaults (acq_rel,
// system) are safe for memory other processes and GPUs touch. Bitwise operations take integral
// types only; add/sub/min/max/xchg/cas also take float and double.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "aperture/config.h"
#include "aperture/translate.h"

#if APERTURE_HAS_CUDA_COMPILER
#  include <cuda/atomic>
#elif APERTURE_HAS_HIP_COMPILER
#  include "aperture/detail/hip_atomic_ref.h"
#endif

namespace aperture {

enum class order { relaxed, acquire, release, acq_rel, seq_cst };
// block: threads of one CUDA block; device: one GPU; system: every GPU and CPU (other processes).
enum class scope { block, device, system };

namespace detail {

#if APERTURE_HAS_CUDA_COMPILER
using memory_order = cuda::std::memory_order;
#else
using memory_order = std::memory_order;
#endif

APERTURE_HD memory_order to_memory_order(order o) {
  switch (o) {
    case order::relaxed: return memory_order::relaxed;
    case order::acquire: return memory_order::acquire;
    case order::release: return memory_order::release;
    case order::acq_rel: return memory_order::acq_rel;
    default: return memory_order::seq_cst;
  }
}

// A load may not carry release semantics (and a store not acquire): the standard makes such
// orders undefined, so they are narrowed to the strongest order the operation can have.
APERTURE_HD memory_order load_order(order o) {
  return (o == order::release || o == order::acq_rel) ? memory_order::acquire : to_memory_order(o);
}
APERTURE_HD memory_order store_order(order o) {
  return (o == order::acquire || o == order::acq_rel) ? memory_order::release : to_memory_order(o);
}

// Calls fn(atomic_ref) with an atomic reference of the requested scope. On the host every scope
// is the same std::atomic_ref: host atomics are always visible to every thread and process.
template <class T, class Fn>
APERTURE_HD T with_atomic_ref(T* target, scope s, Fn fn) {
#if APERTURE_HAS_CUDA_COMPILER
  switch (s) {
    case scope::block: return fn(cuda::atomic_ref<T, cuda::thread_scope_block>(*target));
    case scope::device: return fn(cuda::atomic_ref<T, cuda::thread_scope_device>(*target));
    default: return fn(cuda::atomic_ref<T, cuda::thread_scope_system>(*target));
  }
#elif APERTURE_HAS_HIP_COMPILER
  switch (s) {
    case scope::block: return fn(HipAtomicRef<T, __HIP_MEMORY_SCOPE_WORKGROUP>(*target));
    case scope::device: return fn(HipAtomicRef<T, __HIP_MEMORY_SCOPE_AGENT>(*target));
    default: return fn(HipAtomicRef<T, __HIP_MEMORY_SCOPE_SYSTEM>(*target));
  }
#else
  (void)s;
  return fn(std::atomic_ref<T>(*target));
#endif
}

template <class T>
inline constexpr bool is_atomic_arithmetic_v =
    std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::uint32_t> || std::is_same_v<T, std::int64_t> ||
    std::is_same_v<T, std::uint64_t> || std::is_same_v<T, float> || std::is_same_v<T, double>;

template <class T>
inline constexpr bool is_atomic_integral_v = is_atomic_arithmetic_v<T> && std::is_integral_v<T>;

// fetch_min / fetch_max as a compare-exchange loop, for targets whose atomic_ref lacks them.
template <class T, class Ref, class Better>
APERTURE_HD T fetch_select(Ref ref, T value, memory_order mo, Better better) {
  T old = ref.load(memory_order::relaxed);
  while (better(value, old) && !ref.compare_exchange_weak(old, value, mo, memory_order::relaxed)) {
  }
  return old;
}

}  // namespace detail

#define APERTURE_DETAIL_ATOMIC_CHECK(T, kind)                                                                 \
  static_assert(detail::is_atomic_##kind##_v<T>,                                                             \
                "aperture atomics take int32_t, uint32_t, int64_t, uint64_t" \
                " (and float, double for arithmetic operations); got another type")

template <class T>
APERTURE_HD T atomic_add(T* ptr, T value, int from_rank, int to_rank, const std::int64_t* peer_bases,
                         order o = order::acq_rel, scope s = scope::system) {
  APERTURE_DETAIL_ATOMIC_CHECK(T, arithmetic);
  const auto mo = detail::to_memory_order(o);
  return detail::with_atomic_ref(translate(ptr, from_rank, to_rank, peer_bases), s,
                                 [=](auto ref) -> T { return ref.fetch_add(value, mo); });
}

template <class T>
APERTURE_HD T atomic_sub(T* ptr, T value, int from_rank, int to_rank, const std::int64_t* peer_bases,
                         order o = order::acq_rel, scope s = scope::system) {
  APERTURE_DETAIL_ATOMIC_CHECK(T, arithmetic);
  const auto mo = detail::to_memory_order(o);
  return detail::with_atomic_ref(translate(ptr, from_rank, to_rank, peer_bases), s,
                                 [=](auto ref) -> T { return ref.fetch_sub(value, mo); });
}

template <class T>
APERTURE_HD T atomic_and(T* ptr, T value, int from_rank, int to_rank, const std::int64_t* peer_bases,
                         order o = order::acq_rel, scope s = scope::system) {
  APERTURE_DETAIL_ATOMIC_CHECK(T, integral);
  const auto mo = detail::to_memory_order(o);
  return detail::with_atomic_ref(translate(ptr, from_rank, to_rank, peer_bases), s,
                                 [=](auto ref) -> T { return ref.fetch_and(value, mo); });
}

template <class T>
APERTURE_HD T atomic_or(T* ptr, T value, int from_rank, int to_rank, const std::int64_t* peer_bases,
                        order o = order::acq_rel, scope s = scope::system) {
  APERTURE_DETAIL_ATOMIC_CHECK(T, integral);
  const auto mo = detail::to_memory_order(o);
  return detail::with_atomic_ref(translate(ptr, from_rank, to_rank, peer_bases), s,
                                 [=](auto ref) -> T { return ref.fetch_or(value, mo); });
}

template <class T>
APERTURE_HD T atomic_xor(T* ptr, T value, int from_rank, int to_rank, const std::int64_t* peer_bases,
                         order o = order::acq_rel, scope s = scope::system) {
  APERTURE_DETAIL_ATOMIC_CHECK(T, integral);
  const auto mo = detail::to_memory_order(o);
  return detail::with_atomic_ref(translate(ptr, from_rank, to_rank, peer_bases), s,
                                 [=](auto ref) -> T { return ref.fetch_xor(value, mo); });
}

template <class T>
APERTURE_HD T atomic_min(T* ptr, T value, int from_rank, int to_rank, const std::int64_t* peer_bases,
                         order o = order::acq_rel, scope s = scope::system) {
  APERTURE_DETAIL_ATOMIC_CHECK(T, arithmetic);
  const auto mo = detail::to_memory_order(o);
  return detail::with_atomic_ref(translate(ptr, from_rank, to_rank, peer_bases), s, [=](auto ref) -> T {
    return detail::fetch_select(ref, value, mo, [](T a, T b) { return a < b; });
  });
}

template <class T>
APERTURE_HD T atomic_max(T* ptr, T value, int from_rank, int to_rank, const std::int64_t* peer_bases,
                         order o = order::acq_rel, scope s = scope::system) {
  APERTURE_DETAIL_ATOMIC_CHECK(T, arithmetic);
  const auto mo = detail::to_memory_order(o);
  return detail::with_atomic_ref(translate(ptr, from_rank, to_rank, peer_bases), s, [=](auto ref) -> T {
    return detail::fetch_select(ref, value, mo, [](T a, T b) { return a > b; });
  });
}

template <class T>
APERTURE_HD T atomic_xchg(T* ptr, T value, int from_rank, int to_rank, const std::int64_t* peer_bases,
                          order o = order::acq_rel, scope s = scope::system) {
  APERTURE_DETAIL_ATOMIC_CHECK(T, arithmetic);
  const auto mo = detail::to_memory_order(o);
  return detail::with_atomic_ref(translate(ptr, from_rank, to_rank, peer_bases), s,
                                 [=](auto ref) -> T { return ref.exchange(value, mo); });
}

// Replaces to_rank's *ptr with `desired` if it equals `expected`; returns the value found, so
// the swap happened exactly when the result equals `expected`.
template <class T>
APERTURE_HD T atomic_cas(T* ptr, T expected, T desired, int from_rank, int to_rank, const std::int64_t* peer_bases,
                         order o = order::acq_rel, scope s = scope::system) {
  APERTURE_DETAIL_ATOMIC_CHECK(T, arithmetic);
  const auto mo = detail::to_memory_order(o);
  const auto failure = detail::load_order(o);
  return detail::with_atomic_ref(translate(ptr, from_rank, to_rank, peer_bases), s, [=](auto ref) -> T {
    T seen = expected;
    ref.compare_exchange_strong(seen, desired, mo, failure);
    return seen;
  });
}

#undef APERTURE_DETAIL_ATOMIC_CHECK

}  // namespace aperture
