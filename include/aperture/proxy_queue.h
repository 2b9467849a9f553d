// aperture/proxy_queue.h — the request queue between GPU threads and the host proxy.
//
// A kernel cannot call the host engine (MPI), so a GPU thread that addresses a peer whose table
// entry is 0 writes the request into a slot of this queue, in host-pinned memory the GPU can
// map, and the rank's proxy thread (aperture/gpu_proxy.h) carries it out through the engine.
// The code here is __host__ __device__: the same producer runs in a kernel and, in the tests, on
// CPU threads.
//
// The protocol (a bounded ring; many producers, one consumer):
//   1. claim:   ticket = tickets++ (an atomic on the producers' side only); slot = ticket % capacity.
//   2. wait:    until slot.sequence == ticket (the slot's previous user has freed it). This is the
//               back-pressure: a full queue makes producers wait, each at most `timeout_ns`.
//   3. publish: write the request (and a put's data into the slot's payload), then a release
//               store slot.sequence = ticket + 1.
//   4. the proxy takes tickets in order: it waits for slot.sequence == its ticket + 1, carries
//      the request out, writes the status, the atomic's old value or a get's data, and makes
//      a release store slot.done = ticket + 1.
//   5. complete: the producer waits for slot.done == ticket + 1 (acquire), reads the result, and
//      frees the slot for the next round: slot.sequence = ticket + capacity.
// Every call waits for its requests' completion (as every host engine call does), and the proxy carries
// requests out one at a time in ticket order, so a signal issued after puts (by the same thread,
// or by another after a barrier with it) lands after them.
//
// Data: a put's source and a get's destination may be GPU memory the host cannot read, so the
// GPU thread stages them through the slot's payload (kProxyPayloadBytes); a longer transfer
// goes as several requests, one payload each, in order, up to kProxyWindow of them published
// before the producer waits for the first: the proxy carries one out while the producer writes
// the next. A window never holds more tickets than the queue has slots, so a producer waits only
// for slots of lower tickets than its own, and the lowest ticket not yet freed always progresses:
// its producer's waits are for slots freed already, and the proxy has carried out every ticket
// before it.
//
// Limits: `tickets` is advanced by atomics of one kind of producer only (one GPU's threads, or
// the host's threads), never both on one queue: a GPU atomic on mapped host memory is not atomic
// against the host's. A producer that times out has abandoned its ticket; the queue is then
// broken for good (later producers time out as well) and the kernel stops with a trap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "aperture/atomic.h"
#include "aperture/config.h"
#include "aperture/engine_request.h"
#include "aperture/signal.h"  // detail::load_acquire, signal_translated: the flag accesses

#include "aperture/detail/backoff.h"
#include "aperture/detail/device_time.h"

namespace aperture {

// Bytes of data one request carries; a put or get of more is split into pieces of this size.
inline constexpr std::size_t kProxyPayloadBytes = 1024;
// Requests of one transfer in flight at once (fewer where the queue has fewer slots).
inline constexpr std::uint32_t kProxyWindow = 8;

// How a request through the queue ended, as the producer sees it.
enum class ProxyStatus : std::uint32_t {
  ok = 0,
  engine_failed = 1,       // the engine threw; the proxy keeps the message (GpuProxy::last_error)
  queue_full_timeout = 2,  // no slot freed within timeout_ns: the proxy is stuck or gone
  completion_timeout = 3,  // the request was published but not carried out within timeout_ns
  closed = 4,              // the proxy stopped before carrying the request out
  bad_request = 5,         // the proxy refused the request (a transfer longer than a payload)
};

APERTURE_HD const char* proxy_status_name(ProxyStatus status) {
  switch (status) {
    case ProxyStatus::ok: return "ok";
    case ProxyStatus::engine_failed: return "engine_failed";
    case ProxyStatus::queue_full_timeout: return "queue_full_timeout";
    case ProxyStatus::completion_timeout: return "completion_timeout";
    case ProxyStatus::closed: return "closed";
    case ProxyStatus::bad_request: return "bad_request";
  }
  return "unknown";
}

// One request and its answer. 64-byte aligned so two slots never share a cache line (or a PCIe
// write combining buffer) that the host and the GPU both write.
struct alignas(64) ProxySlot {
  std::uint64_t sequence;  // the ring protocol above: ticket (free), ticket + 1 (published)
  std::uint64_t done;      // ticket + 1 once the proxy has carried the request out
  std::uint32_t status;    // a ProxyStatus, valid once done says so
  std::uint32_t reserved;
  std::uint64_t result;    // fetch_op, compare_swap: the old value (element_bytes bytes)
  EngineRequest request;   // `local` is ignored: data travels in `payload`
  alignas(16) unsigned char payload[kProxyPayloadBytes];
};
static_assert(std::is_trivially_copyable_v<ProxySlot>, "slots live in raw pinned memory");

// What a kernel needs of the queue: trivially copyable, inside the EngineChannel of a PeerView.
// The host object that owns the memory and runs the proxy is aperture::GpuProxy.
struct ProxyQueue {
  ProxySlot* slots = nullptr;             // capacity slots (host-pinned, mapped for the GPU)
  std::uint64_t* tickets = nullptr;       // the next ticket (device memory for GPU producers)
  const std::uint32_t* closed = nullptr;  // set by the host when the proxy stops
  std::uint32_t capacity = 0;
  std::uint64_t timeout_ns = 0;           // each wait of a producer: for a slot, for completion

  APERTURE_HD bool attached() const { return slots != nullptr; }
};
static_assert(std::is_trivially_copyable_v<ProxyQueue>, "a queue is passed to kernels inside a PeerView");

namespace detail {

APERTURE_HD std::uint32_t proxy_load_flag(const std::uint32_t* flag) {
  auto* f = const_cast<std::uint32_t*>(flag);  // atomic_ref needs a non-const object; we only load.
  return with_atomic_ref(f, scope::system, [](auto ref) -> std::uint32_t { return ref.load(memory_order::acquire); });
}

// Polls until ready() holds: ok; closed when the proxy stops first; `timeout` after timeout_ns.
template <class Ready>
APERTURE_HD ProxyStatus proxy_wait(const ProxyQueue& queue, ProxyStatus timeout, Ready ready) {
  APERTURE_IF_DEVICE_ELSE(
      (DeviceBackoff backoff(queue.timeout_ns); for (;;) {
         if (ready()) return ProxyStatus::ok;
         if (proxy_load_flag(queue.closed) != 0) return ProxyStatus::closed;
         if (!backoff.pause()) return timeout;
       }),
      (Backoff backoff(queue.timeout_ns); for (;;) {
        if (ready()) return ProxyStatus::ok;
        if (proxy_load_flag(queue.closed) != 0) return ProxyStatus::closed;
        if (!backoff.pause()) return timeout;
      }))
}

// Byte copy that works between any two of: GPU memory, a thread's stack, mapped host memory.
// 8 bytes at a time where both ends allow it (each access crosses PCIe on one side).
APERTURE_HD void proxy_copy(void* to, const void* from, std::size_t bytes) {
  auto* d = static_cast<unsigned char*>(to);
  const auto* s = static_cast<const unsigned char*>(from);
  std::size_t i = 0;
  if (((reinterpret_cast<std::uintptr_t>(d) | reinterpret_cast<std::uintptr_t>(s)) & 7) == 0)
    for (; i + 8 <= bytes; i += 8)
      *reinterpret_cast<std::uint64_t*>(d + i) = *reinterpret_cast<const std::uint64_t*>(s + i);
  for (; i < bytes; ++i) d[i] = s[i];
}

// The slot of a claimed ticket, once its previous user has freed it (back-pressure).
APERTURE_HD ProxyStatus proxy_wait_free(const ProxyQueue& queue, std::uint64_t ticket) {
  ProxySlot& slot = queue.slots[ticket % queue.capacity];
  return proxy_wait(queue, ProxyStatus::queue_full_timeout, [&] { return load_acquire(&slot.sequence) == ticket; });
}

// Writes `request` (and `in`, request.bytes bytes, into the payload) into the free slot of
// `ticket` and publishes it.
APERTURE_HD void proxy_publish(const ProxyQueue& queue, std::uint64_t ticket, const EngineRequest& request,
                               const void* in) {
  ProxySlot& slot = queue.slots[ticket % queue.capacity];
  slot.request = request;
  if (in != nullptr) proxy_copy(slot.payload, in, request.bytes);
  signal_translated(&slot.sequence, ticket + 1);  // release: the request and payload before it
}

// Waits for the published `ticket`'s completion, reads its answer (`out`: `out_bytes` of the
// payload; `result`: an atomic's old value) where it ended ok, and frees the slot. A wait that
// fails (timeout, closed) leaves the slot taken: the queue is broken then (the header says why).
APERTURE_HD ProxyStatus proxy_complete(const ProxyQueue& queue, std::uint64_t ticket, void* out,
                                       std::uint64_t out_bytes, std::uint64_t* result) {
  ProxySlot& slot = queue.slots[ticket % queue.capacity];
  ProxyStatus status =
      proxy_wait(queue, ProxyStatus::completion_timeout, [&] { return load_acquire(&slot.done) == ticket + 1; });
  if (status != ProxyStatus::ok) return status;
  status = static_cast<ProxyStatus>(slot.status);
  if (status == ProxyStatus::ok) {
    if (result != nullptr) *result = slot.result;
    if (out != nullptr) proxy_copy(out, slot.payload, out_bytes);
  }
  signal_translated(&slot.sequence, ticket + queue.capacity);  // release: our reads of the slot before it
  return status;
}

APERTURE_HD std::uint64_t proxy_claim(const ProxyQueue& queue, std::uint64_t tickets) {
  return with_atomic_ref(queue.tickets, scope::device,
                         [&](auto ref) -> std::uint64_t { return ref.fetch_add(tickets, memory_order::relaxed); });
}

// One request through the queue, waiting for its completion. `in` (request.bytes bytes, put and
// signal's data) goes into the payload before publishing; `out` (get) receives the payload
// afterwards; `result` (atomics) the old value. Requires request.bytes <= kProxyPayloadBytes.
APERTURE_HD ProxyStatus proxy_call(const ProxyQueue& queue, const EngineRequest& request, const void* in, void* out,
                                   std::uint64_t* result) {
  if (request.bytes > kProxyPayloadBytes) return ProxyStatus::bad_request;  // before a ticket: the ring stays whole
  const std::uint64_t ticket = proxy_claim(queue, 1);
  const ProxyStatus status = proxy_wait_free(queue, ticket);
  if (status != ProxyStatus::ok) return status;
  proxy_publish(queue, ticket, request, in);
  return proxy_complete(queue, ticket, out, request.bytes, result);
}

// put (local -> the peer) or get (the peer -> local) of any length: one request per payload, in
// order, a window of them at a time (the header's protocol). Returns the first status that is
// not ok (every published request of the window still completes and is freed first, unless a
// wait failed: the queue is broken then).
APERTURE_HD ProxyStatus proxy_transfer(const ProxyQueue& queue, EngineOp op, int peer, std::uint64_t offset,
                                       const void* local, std::uint64_t bytes) {
  const std::uint64_t pieces = (bytes + kProxyPayloadBytes - 1) / kProxyPayloadBytes;
  const std::uint64_t widest = kProxyWindow < queue.capacity ? kProxyWindow : queue.capacity;
  auto* bytes_at = static_cast<unsigned char*>(const_cast<void*>(local));
  for (std::uint64_t first = 0; first < pieces;) {
    const std::uint64_t window = pieces - first < widest ? pieces - first : widest;
    const std::uint64_t ticket = proxy_claim(queue, window);
    for (std::uint64_t i = 0; i < window; ++i) {
      const ProxyStatus status = proxy_wait_free(queue, ticket + i);
      if (status != ProxyStatus::ok) return status;
      const std::uint64_t at = (first + i) * kProxyPayloadBytes;
      EngineRequest request;
      request.op = op;
      request.peer = peer;
      request.offset = offset + at;
      request.bytes = bytes - at < kProxyPayloadBytes ? bytes - at : kProxyPayloadBytes;
      proxy_publish(queue, ticket + i, request, op == EngineOp::put ? bytes_at + at : nullptr);
    }
    ProxyStatus first_failure = ProxyStatus::ok;
    for (std::uint64_t i = 0; i < window; ++i) {
      const std::uint64_t at = (first + i) * kProxyPayloadBytes;
      const std::uint64_t piece = bytes - at < kProxyPayloadBytes ? bytes - at : kProxyPayloadBytes;
      const ProxyStatus status =
          proxy_complete(queue, ticket + i, op == EngineOp::get ? bytes_at + at : nullptr, piece, nullptr);
      if (status == ProxyStatus::completion_timeout || status == ProxyStatus::closed) return status;
      if (first_failure == ProxyStatus::ok) first_failure = status;
    }
    if (first_failure != ProxyStatus::ok) return first_failure;
    first += window;
  }
  return ProxyStatus::ok;
}

}  // namespace detail

}  // namespace aperture
