// src/engines/apply_request.h — an engine's atomic or signal, applied by the target to a word of
// its own memory with the library's own atomics (aperture/atomic.h, aperture/signal.h).
//
// The message engine's service thread calls this on host memory, and its GPU side runs the same
// code in a one-thread kernel on GPU memory, so a request from another node is atomic with
// respect to the direct atomics of the target's own node (system scope), not only with respect
// to other engine requests. The table {0} makes translate() the identity: the word is the
// target's own.
#pragma once

#include <cstdint>

#include "aperture/atomic.h"
#include "aperture/config.h"
#include "aperture/engine_request.h"
#include "aperture/signal.h"

namespace aperture::detail {

// 0: applied; otherwise the request names an atomic its element cannot take (a bitwise atomic on
// a floating-point element), which the typed PeerView calls never produce.
enum class ApplyStatus : std::uint32_t { ok = 0, unsupported = 1 };

template <class T>
APERTURE_HD ApplyStatus apply_atomic_as(void* word, const EngineRequest& r, std::uint64_t* old_bits) {
  const std::int64_t identity[1] = {0};
  T* p = static_cast<T*>(word);
  T value, compare, old{};
  __builtin_memcpy(&value, &r.value, sizeof(T));
  __builtin_memcpy(&compare, &r.compare, sizeof(T));
  if (r.op == EngineOp::compare_swap) {
    old = atomic_cas(p, compare, value, 0, 0, identity);
  } else {
    switch (r.atomic) {
      case EngineAtomic::add: old = atomic_add(p, value, 0, 0, identity); break;
      case EngineAtomic::sub: old = atomic_sub(p, value, 0, 0, identity); break;
      case EngineAtomic::min: old = atomic_min(p, value, 0, 0, identity); break;
      case EngineAtomic::max: old = atomic_max(p, value, 0, 0, identity); break;
      case EngineAtomic::replace: old = atomic_xchg(p, value, 0, 0, identity); break;
      case EngineAtomic::band:
      case EngineAtomic::bor:
      case EngineAtomic::bxor:
        if constexpr (std::is_integral_v<T>) {
          if (r.atomic == EngineAtomic::band) old = atomic_and(p, value, 0, 0, identity);
          else if (r.atomic == EngineAtomic::bor) old = atomic_or(p, value, 0, 0, identity);
          else old = atomic_xor(p, value, 0, 0, identity);
          break;
        } else {
          return ApplyStatus::unsupported;
        }
    }
  }
  *old_bits = 0;
  __builtin_memcpy(old_bits, &old, sizeof(T));
  return ApplyStatus::ok;
}

// A fetch_op or compare_swap on the word at `word`; the old value's bits into `*old_bits`.
APERTURE_HD ApplyStatus apply_atomic(void* word, const EngineRequest& r, std::uint64_t* old_bits) {
  const bool wide = r.element_bytes == 8;
  switch (r.element) {
    case EngineElement::signed_int:
      return wide ? apply_atomic_as<std::int64_t>(word, r, old_bits) : apply_atomic_as<std::int32_t>(word, r, old_bits);
    case EngineElement::unsigned_int:
      return wide ? apply_atomic_as<std::uint64_t>(word, r, old_bits)
                  : apply_atomic_as<std::uint32_t>(word, r, old_bits);
    case EngineElement::floating:
      return wide ? apply_atomic_as<double>(word, r, old_bits) : apply_atomic_as<float>(word, r, old_bits);
  }
  return ApplyStatus::unsupported;
}

// A signal: the release store of `value` into the 64-bit flag at `flag`, at system scope.
APERTURE_HD void apply_signal(std::uint64_t* flag, std::uint64_t value) {
  const std::int64_t identity[1] = {0};
  signal(flag, value, 0, 0, identity);
}

}  // namespace aperture::detail
