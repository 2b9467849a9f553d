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
// `host_call`. Device code cannot call the host: a channel with a proxy queue (`queue`, set by
// aperture::GpuProxy, aperture/gpu_proxy.h) sends a kernel's request through that queue to the
// rank's proxy thread, which calls the engine; without a queue an indirect operation in a
// kernel traps (a clear failure, never a wild store to address 0). A request the proxy could not
// carry out (the engine failed, the queue timed out or closed) also traps, after printing the
// operation, the peer and the status: a kernel has no exception to throw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>  // printf in kernels
#include <type_traits>

#include "aperture/config.h"
#include "aperture/engine_request.h"
#include "aperture/proxy_queue.h"

namespace aperture {

// Carries out `request`; for fetch_op and compare_swap writes the old value (element_bytes
// bytes) to `result`. Throws aperture::Error when the engine fails.
using EngineHostCall = void (*)(void* context, const EngineRequest& request, void* result);

struct EngineChannel {
  void* context = nullptr;            // the engine's state for this allocation (host memory)
  EngineHostCall host_call = nullptr; // null: no engine; indirect peers are refused
  // Where this map's copy starts inside the memory the engine covers (a view's offset).
  std::uint64_t base_offset = 0;
  ProxyQueue queue{};  // how a kernel reaches the engine; empty: it cannot (indirect ops trap)

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

// A kernel's request that did not end ok: say which and stop the kernel (device code only).
APERTURE_HD void engine_proxy_failed(ProxyStatus status, EngineOp op, int peer, std::uint64_t offset) {
  (void)status, (void)op, (void)peer, (void)offset;
  APERTURE_IF_DEVICE_ELSE((printf("aperture: engine operation %d on rank %d at offset %llu through the GPU proxy "
                                  "ended %s; the host's GpuProxy::last_error() has the engine's message\n",
                                  int(op), peer, static_cast<unsigned long long>(offset), proxy_status_name(status));
                           APERTURE_DEVICE_TRAP();),
                          ())
}

// Hands `request` (not a put or get: those go through engine_transfer) to the channel: the host
// calls the engine; a kernel posts it to the proxy queue, or traps where there is none, rather
// than touch address 0.
APERTURE_HD void engine_submit(const EngineChannel& channel, const EngineRequest& request, std::uint64_t* result) {
  APERTURE_IF_DEVICE_ELSE(
      (if (!channel.queue.attached()) APERTURE_DEVICE_TRAP();
       const ProxyStatus status = proxy_call(channel.queue, request, nullptr, nullptr, result);
       if (status != ProxyStatus::ok) engine_proxy_failed(status, request.op, request.peer, request.offset);),
      (channel.host_call(channel.context, request, result);))
}

// put: `local` -> the peer at `offset`; get: the peer at `offset` -> `local`.
APERTURE_DETAIL_OUT_OF_LINE APERTURE_HD void engine_transfer(EngineChannel channel, EngineOp op, int peer,
                                                             std::uint64_t offset, const void* local,
                                                             std::uint64_t bytes) {
  APERTURE_IF_DEVICE_ELSE(
      (if (!channel.queue.attached()) APERTURE_DEVICE_TRAP();
       const ProxyStatus status = proxy_transfer(channel.queue, op, peer, offset, local, bytes);
       if (status != ProxyStatus::ok) engine_proxy_failed(status, op, peer, offset);),
      (EngineRequest request; request.op = op; request.peer = peer; request.offset = offset;
       request.bytes = bytes; request.local = local; channel.host_call(channel.context, request, nullptr);))
}

template <class T>
APERTURE_DETAIL_OUT_OF_LINE APERTURE_HD T engine_load(EngineChannel channel, int peer, std::uint64_t offset) {
  T value{};  // filled by the engine (through the proxy queue in a kernel)
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
  std::uint64_t old = 0;  // the engine writes element_bytes bytes: the low ones, little-endian
  engine_submit(channel, request, &old);
  return engine_value_from_bits<T>(old);
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
