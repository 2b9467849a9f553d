// aperture/detail/hip_atomic_ref.h — the part of cuda::atomic_ref that atomic.h uses, for hipcc.
//
// HIP has no libcu++: with_atomic_ref (atomic.h) hands its operations this reference instead,
// built on clang's __hip_atomic builtins, which take a memory scope as CUDA's thread_scope does
// and compile in the host pass as well. Only hipcc includes this header.
#pragma once

#include <atomic>
#include <type_traits>

#include "aperture/config.h"

namespace aperture::detail {

// Scope is a __HIP_MEMORY_SCOPE_* constant (workgroup, agent, system). std::memory_order's
// values are the __ATOMIC_* constants the builtins take.
template <class T, int Scope>
class HipAtomicRef {
 public:
  APERTURE_HD explicit HipAtomicRef(T& target) : p_(&target) {}

  APERTURE_HD T load(std::memory_order mo) const { return __hip_atomic_load(p_, order(mo), Scope); }
  APERTURE_HD void store(T value, std::memory_order mo) const { __hip_atomic_store(p_, value, order(mo), Scope); }
  APERTURE_HD T exchange(T value, std::memory_order mo) const {
    return __hip_atomic_exchange(p_, value, order(mo), Scope);
  }
  APERTURE_HD T fetch_add(T value, std::memory_order mo) const {
    return __hip_atomic_fetch_add(p_, value, order(mo), Scope);
  }
  // No __hip_atomic_fetch_sub before clang 17: add the negation (modular for unsigned types).
  APERTURE_HD T fetch_sub(T value, std::memory_order mo) const {
    return __hip_atomic_fetch_add(p_, static_cast<T>(T(0) - value), order(mo), Scope);
  }
  APERTURE_HD T fetch_and(T value, std::memory_order mo) const {
    return __hip_atomic_fetch_and(p_, value, order(mo), Scope);
  }
  APERTURE_HD T fetch_or(T value, std::memory_order mo) const {
    return __hip_atomic_fetch_or(p_, value, order(mo), Scope);
  }
  APERTURE_HD T fetch_xor(T value, std::memory_order mo) const {
    return __hip_atomic_fetch_xor(p_, value, order(mo), Scope);
  }
  APERTURE_HD bool compare_exchange_weak(T& expected, T desired, std::memory_order success,
                                         std::memory_order failure) const {
    return __hip_atomic_compare_exchange_weak(p_, &expected, desired, order(success), order(failure), Scope);
  }
  APERTURE_HD bool compare_exchange_strong(T& expected, T desired, std::memory_order success,
                                           std::memory_order failure) const {
    return __hip_atomic_compare_exchange_strong(p_, &expected, desired, order(success), order(failure), Scope);
  }

 private:
  APERTURE_HD static int order(std::memory_order mo) { return static_cast<int>(mo); }
  T* p_;
};

}  // namespace aperture::detail
