// aperture/gpu_proxy.h — the host side of the GPU proxy channel: a request queue and the thread
// that drains it.
//
// A kernel cannot call MPI. A GpuProxy gives a map's engine (aperture/engine_channel.h) a queue
// in host-pinned memory mapped for the GPU (aperture/proxy_queue.h) and a proxy thread that takes
// the queue's requests in ticket order and carries each out through the engine's host call, as a
// host thread's PeerView operation would. A view from `peer_view()` then reaches indirect peers
// from a kernel too:
//
//     aperture::GpuProxy proxy(allocation.map);      // one per rank and engine; starts the thread
//     PeerView peers = proxy.peer_view(device_view); // the view, with the queue in its channel
//     kernel<<<g, b>>>(peers, ...);                  // put/get/atomics/signal on any peer
//     cudaDeviceSynchronize();                       // every request has completed by then
//
// The proxy works on the engine's side of the map only: the data of a request travels through
// the slot's payload (the GPU thread copies a put's data in and a get's data out), so the engine
// sees host memory only, whatever memory the kernel's pointers are in.
//
// Lifetime: the destructor (or stop()) stops the thread; a producer still waiting then gets
// ProxyStatus::closed (a kernel traps) instead of waiting for ever. The proxy keeps the map's
// engine alive while it runs, but the memory's free is collective and closes the engine: stop
// the proxy, with every kernel that uses it finished, before freeing the memory. A request the
// engine fails (it throws aperture::Error) ends as ProxyStatus::engine_failed for its producer;
// the proxy counts it and keeps the first message (last_error()), and goes on with the next.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "aperture/engine_channel.h"
#include "aperture/export.h"
#include "aperture/peer_view.h"

namespace aperture {

struct SymmetricAddressMap;

class APERTURE_API GpuProxy {
 public:
  // Where the queue lives. device_mapped: slots in pinned host memory mapped for the GPU and the
  // tickets in device memory (producers are one GPU's threads; needs a CUDA build and a GPU). The
  // tickets are on the device current when the proxy is made: run the view's kernels there.
  // host: everything in ordinary host memory, for host threads as producers (tests).
  enum class QueueMemory { device_mapped, host };
  struct Options {
    std::uint32_t capacity = 256;  // slots: requests in flight before producers wait
    QueueMemory memory = QueueMemory::device_mapped;
    double timeout_s = 0;          // each producer wait; 0: APERTURE_TIMEOUT (default 60 s)
  };

  // The proxy for `map`'s engine. Throws aperture::Error when the map has no engine (one node, or
  // ranks not started by mpirun: engine.h says when one is attached).
  explicit GpuProxy(const SymmetricAddressMap& map, Options options);
  explicit GpuProxy(const SymmetricAddressMap& map) : GpuProxy(map, Options{}) {}
  // The same for any engine channel (tests drive a queue with an engine of their own). `owner`
  // is kept alive while the proxy runs.
  GpuProxy(EngineChannel engine, std::shared_ptr<const void> owner, Options options);
  ~GpuProxy();
  GpuProxy(const GpuProxy&) = delete;
  GpuProxy& operator=(const GpuProxy&) = delete;

  // `view` (of memory this proxy's engine covers) with the queue in its channel: the value a
  // kernel takes, named as SymmetricAddressMap::peer_view(). Throws when the view's engine is
  // another engine than the proxy's.
  PeerView peer_view(PeerView view) const;
  // The old name of peer_view(view), kept for one release.
  [[deprecated("use GpuProxy::peer_view(view)")]] PeerView view(PeerView view) const { return peer_view(view); }
  // The engine channel with the queue: for kernels that take a channel rather than a view.
  EngineChannel channel() const { return channel_; }
  // The queue alone, as producers see it (the tests' host threads post to it).
  const ProxyQueue& queue() const { return channel_.queue; }

  std::uint64_t completed() const { return completed_.load(std::memory_order_acquire); }  // requests carried out
  std::uint64_t failures() const { return failures_.load(std::memory_order_acquire); }    // of which the engine failed
  std::string last_error() const;  // the engine's first failure message; "" when none

  // Stops the proxy thread (idempotent); producers waiting get ProxyStatus::closed.
  void stop();

 private:
  struct Memory;
  void drain();
  void carry_out(ProxySlot& slot);

  EngineChannel channel_{};
  std::shared_ptr<const void> owner_;
  std::unique_ptr<Memory> memory_;
  ProxySlot* host_slots_ = nullptr;
  std::uint32_t* host_closed_ = nullptr;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::uint64_t> failures_{0};
  mutable std::mutex error_mutex_;
  std::string first_error_;
  std::thread thread_;
};

}  // namespace aperture
