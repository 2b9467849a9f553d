// src/engines/gpu_proxy.cpp — the proxy thread that carries a kernel's requests to the engine
// (aperture/gpu_proxy.h; the queue's protocol is in aperture/proxy_queue.h).
#include "aperture/gpu_proxy.h"

#include <cstdlib>
#include <exception>
#include <new>
#include <utility>

#include "aperture/address_map.h"
#include "aperture/detail/backoff.h"
#include "aperture/detail/env_timeout.h"
#include "aperture/error.h"
#include "common/format.h"

#if APERTURE_WITH_CUDA
#  include <cuda_runtime.h>

#  include "common/cuda_check.h"
#endif

namespace aperture {

// The queue's memory, as the host and as producers address it, and how to give it back.
struct GpuProxy::Memory {
  ProxySlot* host_slots = nullptr;
  std::uint32_t* host_closed = nullptr;
  ProxyQueue queue{};  // the producers' addresses
  bool cuda = false;

  Memory(std::uint32_t capacity, QueueMemory kind) {
    const std::size_t slot_bytes = sizeof(ProxySlot) * capacity;
    if (kind == QueueMemory::host) {
      host_slots = static_cast<ProxySlot*>(::operator new(slot_bytes, std::align_val_t{alignof(ProxySlot)}));
      host_closed = new std::uint32_t(0);
      queue.slots = host_slots;
      queue.tickets = new std::uint64_t(0);
      queue.closed = host_closed;
      return;
    }
#if APERTURE_WITH_CUDA
    cuda = true;
    try {
      // Portable: mapped for every device of the process; the producers use the device pointers.
      void* slots = nullptr;
      APERTURE_CUDA_CHECK(cudaHostAlloc(&slots, slot_bytes, cudaHostAllocMapped | cudaHostAllocPortable),
                          "GpuProxy queue");
      host_slots = static_cast<ProxySlot*>(slots);
      void* closed = nullptr;
      APERTURE_CUDA_CHECK(cudaHostAlloc(&closed, sizeof(std::uint32_t), cudaHostAllocMapped | cudaHostAllocPortable),
                          "GpuProxy queue");
      host_closed = static_cast<std::uint32_t*>(closed);
      *host_closed = 0;
      void* device_slots = nullptr;
      void* device_closed = nullptr;
      APERTURE_CUDA_CHECK(cudaHostGetDevicePointer(&device_slots, slots, 0), "GpuProxy queue");
      APERTURE_CUDA_CHECK(cudaHostGetDevicePointer(&device_closed, closed, 0), "GpuProxy queue");
      // The tickets are advanced by GPU atomics only: device memory, where they are fast.
      void* tickets = nullptr;
      APERTURE_CUDA_CHECK(cudaMalloc(&tickets, sizeof(std::uint64_t)), "GpuProxy queue");
      queue.tickets = static_cast<std::uint64_t*>(tickets);
      APERTURE_CUDA_CHECK(cudaMemset(tickets, 0, sizeof(std::uint64_t)), "GpuProxy queue");
      queue.slots = static_cast<ProxySlot*>(device_slots);
      queue.closed = static_cast<const std::uint32_t*>(device_closed);
    } catch (...) {
      release();
      throw;
    }
#else
    throw Error(ErrorCode::unavailable,
                "GpuProxy: a queue in device-mapped memory needs aperture built with CUDA (nvcc found at "
                "configure time); build with CUDA, or use QueueMemory::host for host-thread producers");
#endif
  }
  ~Memory() { release(); }
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;

  void release() noexcept {
    if (!cuda) {
      if (host_slots) ::operator delete(host_slots, std::align_val_t{alignof(ProxySlot)});
      delete host_closed;
      delete queue.tickets;
    } else {
#if APERTURE_WITH_CUDA
      if (host_slots) cudaFreeHost(host_slots);
      if (host_closed) cudaFreeHost(host_closed);
      if (queue.tickets) cudaFree(queue.tickets);
#endif
    }
    host_slots = nullptr;
    host_closed = nullptr;
    queue = {};
  }
};

namespace {

EngineChannel engine_of(const SymmetricAddressMap& map) {
  const EngineChannel engine = map.engine();
  if (!engine.attached())
    throw Error(ErrorCode::unavailable,
                detail::format("GpuProxy: the map of rank {} (of {}) has no engine: every peer is direct, or the "
                               "ranks were not started by mpirun; a proxy serves maps whose indirect peers an "
                               "engine reaches (docs/MULTINODE.md)",
                               map.local_rank, map.world_size));
  return engine;
}

}  // namespace

GpuProxy::GpuProxy(const SymmetricAddressMap& map, Options options)
    : GpuProxy(engine_of(map), map.engine_owner(), options) {}

GpuProxy::GpuProxy(EngineChannel engine, std::shared_ptr<const void> owner, Options options)
    : channel_(engine), owner_(std::move(owner)) {
  if (!engine.attached())
    throw Error(ErrorCode::invalid_argument, "GpuProxy: the engine channel has no host call; pass a map's engine()");
  if (options.capacity < 2 || options.capacity > (1u << 20))
    throw Error(ErrorCode::invalid_argument,
                detail::format("GpuProxy: capacity {} slots is not in [2, 1048576]; 256 is the default",
                               options.capacity));
  const double timeout_s = options.timeout_s > 0 ? options.timeout_s : detail::timeout_seconds();
  memory_ = std::make_unique<Memory>(options.capacity, options.memory);
  host_slots_ = memory_->host_slots;
  host_closed_ = memory_->host_closed;
  for (std::uint32_t i = 0; i < options.capacity; ++i) {
    new (&host_slots_[i]) ProxySlot{};
    host_slots_[i].sequence = i;  // slot i is free for ticket i
  }
  channel_.queue = memory_->queue;
  channel_.queue.capacity = options.capacity;
  channel_.queue.timeout_ns = static_cast<std::uint64_t>(timeout_s * 1e9);
  thread_ = std::thread([this] { drain(); });
}

GpuProxy::~GpuProxy() { stop(); }

void GpuProxy::stop() {
  if (!thread_.joinable()) return;
  stopping_.store(true, std::memory_order_release);
  thread_.join();
  // After the thread: a request published meanwhile is never carried out, and its producer
  // sees `closed` rather than waiting for its timeout.
  detail::with_atomic_ref(host_closed_, scope::system, [](auto ref) -> std::uint32_t {
    ref.store(1, std::memory_order_release);
    return 1;
  });
}

PeerView GpuProxy::peer_view(PeerView view) const {
  if (view.engine.context != channel_.context || view.engine.host_call != channel_.host_call)
    throw Error(ErrorCode::invalid_argument,
                "GpuProxy::peer_view: the view's engine is not this proxy's (a view of another allocation or provider); "
                "make a GpuProxy for that map");
  view.engine.queue = channel_.queue;
  return view;
}

std::string GpuProxy::last_error() const {
  std::lock_guard<std::mutex> lock(error_mutex_);
  return first_error_;
}

// Takes the tickets in order: ticket t is in slot t % capacity once its sequence says t + 1.
void GpuProxy::drain() {
  const std::uint32_t capacity = channel_.queue.capacity;
  for (std::uint64_t next = 0;; ++next) {
    if (stopping_.load(std::memory_order_acquire)) return;  // what is not taken yet ends `closed`
    ProxySlot& slot = host_slots_[next % capacity];
    // Idle: spin, yield, then sleep at most 1 ms between polls (backoff.h), so an idle proxy
    // costs little and stop() returns within a millisecond.
    detail::Backoff backoff(~std::uint64_t{0} >> 2);
    while (detail::load_acquire(&slot.sequence) != next + 1) {
      if (stopping_.load(std::memory_order_acquire)) return;
      if (!backoff.pause()) backoff = detail::Backoff(~std::uint64_t{0} >> 2);
    }
    carry_out(slot);
    signal_translated(&slot.done, next + 1);  // release: status, result and payload first
    completed_.store(next + 1, std::memory_order_release);
  }
}

void GpuProxy::carry_out(ProxySlot& slot) {
  EngineRequest request = slot.request;
  std::uint64_t result = 0;
  ProxyStatus status = ProxyStatus::ok;
  const bool transfer = request.op == EngineOp::put || request.op == EngineOp::get;
  if (transfer && request.bytes > kProxyPayloadBytes) {
    status = ProxyStatus::bad_request;
  } else {
    request.local = transfer ? slot.payload : nullptr;  // the staged data, in pinned host memory
    std::string failure;
    try {
      channel_.host_call(channel_.context, request, &result);
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "the engine threw something that is not a std::exception";
    }
    if (!failure.empty()) {
      status = ProxyStatus::engine_failed;
      failures_.fetch_add(1, std::memory_order_acq_rel);
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (first_error_.empty()) first_error_ = failure;
    }
  }
  slot.result = result;
  slot.status = static_cast<std::uint32_t>(status);
}

}  // namespace aperture
