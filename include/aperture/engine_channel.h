// aperture/engine_channel.h — how an operation reaches a peer that load/store cannot reach.
//
// A peer on another node (or without P2P, or where shmem_ptr said NULL) has table entry 0. A
// map whose provider attached an engine carries an EngineChannel beside its table, and its
// PeerView hands such a peer's operations to the engine (MPI one-sided communication on the
// host) instead of dereferencing 0. The request names the operation, the peer, the byte offset
// from the start of the peer's copy, and the values; the engine completes it before returning
// (a put or a signal is visible at the peer, an atomic has its old value), so operations through
// one channel complete in the order they were issued: data put before a signal is visible once
// the signal is.
//
// The channel is trivially copyable, like the PeerView it sits in. Host code calls through
// `host_call`; device code cannot call the host, and without a proxy queue an indirect
// operation in a kernel traps (a clear failure, never a wild store to address 0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "aperture/config.h"

namespace aperture {

enum class EngineOp : std::uint8_t {
  put,         // `local` -> the peer, `bytes` bytes
  get,         // the peer -> `local`, `bytes` bytes
  fetch_op,    // the atomic `atomic` with `value`; the old value into `result`
  compare_swap,// if the peer's word == `compare`, it becomes `value`; the old value into `result`
  signal,      // release store of `value` into a 64-bit flag, after everything issued before it
};

// What an atomic does, and the element it works on.
enum class EngineAtomic : std::uint8_t { add, sub, band, bor, bxor, min, max, replace };
enum class EngineElement : std::uint8_t { signed_int, unsigned_int, floating };

struct EngineRequest {
  EngineOp op = EngineOp::put;
  EngineAtomic atomic = EngineAtomic::add;
  EngineElement element = EngineElement::unsigned_int;
  std::uint8_t element_bytes = 0;  // 4 or 8 for atomics
  int peer = 0;                    // the rank whose memory is accessed
  std::uint64_t offset = 0;        // bytes from the start of the peer's copy of the allocation
  std::uint64_t bytes = 0;         // put/get
  const void* local = nullptr;     // put: the source; get: the destination (the caller's memory)
  std::uint64_t value = 0;         // atomics, signal: the operand (bits of a T, zero-extended)
  std::uint64_t compare = 0;       // compare_swap: the expected value
};
static_assert(std::is_trivially_copyable_v<EngineRequest>, "requests are copied into queues");

// Carries out `request`; for fetch_op and compare_swap writes the old value (element_bytes
// bytes) to `result`. Throws aperture::Error when the engine fails.
using EngineHostCall = void (*)(void* context, const EngineRequest& request, void* result);

struct EngineChannel {
  void* context = nullptr;            // the engine's state for this allocation (host memory)
  EngineHostCall host_call = nullptr; // null: no engine; indirect peers are refused
  // Where this map's copy starts inside the memory the engine covers (a view's offset).
  std::uint64_t base_offset = 0;

  APERTURE_HD bool attached() const { return host_call != nullptr; }
};
static_assert(std::is_trivially_copyable_v<EngineChannel>, "a channel is passed to kernels inside a PeerView");

// The indirect side of an operation, kept out of the caller's loop: free functions that take the
// channel by value, so a direct-path loop keeps its view's fields in registers (a member function
// would pass `this`, and after a call that may write memory they would be loaded again).
#if defined(__CUDACC__) || defined(__HIP__)
#  define APERTURE_DETAIL_OUT_OF_LINE __noinline__
#elif defined(__GNUC__)
#  define APERTURE_DETAIL_OUT_OF_LINE __attribute__((noinline, cold))
#else
#  define APERTURE_DETAIL_OUT_OF_LINE
#endif

namespace detail {

template <class T>
APERTURE_HD constexpr EngineElement engine_element_of() {
  if constexpr (std::is_floating_point_v<T>) return EngineElement::floating;
  else if constexpr (std::is_signed_v<T>) return EngineElement::signed_int;
  else return EngineElement::unsigned_int;
}

template <class T>
APERTURE_HD std::uint64_t engine_bits_of(T value) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "engine atomics take 4- or 8-byte elements");
  std::uint64_t bits = 0;
  __builtin_memcpy(&bits, &value, sizeof(T));
  return bits;
}

template <class T>
APERTURE_HD T engine_value_from_bits(std::uint64_t bits) {
  T value;
  __builtin_memcpy(&value, &bits, sizeof(T));
  return value;
}

// Hands `request` to the channel: the host calls the engine; a kernel has no way to the host
// engine yet and stops with a trap rather than touch address 0.
APERTURE_HD void engine_submit(const EngineChannel& channel, const EngineRequest& request, void* result) {
  (void)channel, (void)request, (void)result;  // the device branch uses none of them
  APERTURE_IF_DEVICE_ELSE((APERTURE_DEVICE_TRAP();), (channel.host_call(channel.context, request, result);))
}

// put: `local` -> the peer at `offset`; get: the peer at `offset` -> `local`.
APERTURE_DETAIL_OUT_OF_LINE APERTURE_HD void engine_transfer(EngineChannel channel, EngineOp op, int peer,
                                                             std::uint64_t offset, const void* local,
                                                             std::uint64_t bytes) {
  EngineRequest request;
  request.op = op;
  request.peer = peer;
  request.offset = offset;
  request.bytes = bytes;
  request.local = local;
  engine_submit(channel, request, nullptr);
}

template <class T>
APERTURE_DETAIL_OUT_OF_LINE APERTURE_HD T engine_load(EngineChannel channel, int peer, std::uint64_t offset) {
  T value{};  // filled by the engine (a kernel traps before reading it)
  engine_transfer(channel, EngineOp::get, peer, offset, &value, sizeof(T));
  return value;
}

template <class T>
APERTURE_DETAIL_OUT_OF_LINE APERTURE_HD void engine_store(EngineChannel channel, int peer, std::uint64_t offset,
                                                          T value) {
  engine_transfer(channel, EngineOp::put, peer, offset, &value, sizeof(T));
}

template <class T>
APERTURE_DETAIL_OUT_OF_LINE APERTURE_HD T engine_atomic(EngineChannel channel, EngineOp op, EngineAtomic atomic,
                                                        int peer, std::uint64_t offset, T value, T compare) {
  EngineRequest request;
  request.op = op;
  request.atomic = atomic;
  request.element = engine_element_of<T>();
  request.element_bytes = sizeof(T);
  request.peer = peer;
  request.offset = offset;
  request.value = engine_bits_of(value);
  request.compare = engine_bits_of(compare);
  T old{};
  engine_submit(channel, request, &old);
  return old;
}

APERTURE_DETAIL_OUT_OF_LINE APERTURE_HD void engine_signal(EngineChannel channel, int peer, std::uint64_t offset,
                                                           std::uint64_t value) {
  EngineRequest request;
  request.op = EngineOp::signal;
  request.element_bytes = sizeof(std::uint64_t);
  request.peer = peer;
  request.offset = offset;
  request.value = value;
  engine_submit(channel, request, nullptr);
}

}  // namespace detail

}  // namespace aperture
