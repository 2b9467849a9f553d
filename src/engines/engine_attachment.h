// src/engines/engine_attachment.h — a provider's hold on the engine that reaches its memory from
// other nodes: open once over a range, attached to every map made of that range, closed once.
//
// The own-heap providers hold one for their heap (LinearHeapProvider::engine_), the providers
// over a foreign allocator one per allocation (LiveAllocations' entries). Closing is collective,
// so it happens only while every rank is in step: close() where an error must reach the caller
// (free), release() where none can (destructors, cleanup), and never while an exception unwinds
// or after the job lost a rank, when a collective close would wait for ranks that never come;
// abandon() where the other ranks are known not to come (the allocator's runtime is gone).
#pragma once

#include <cstdint>
#include <exception>
#include <utility>

#include "aperture/address_map.h"
#include "aperture/detail/host_wait.h"  // job_watch
#include "engines/engine.h"

namespace aperture::detail {

class EngineAttachment {
 public:
  EngineAttachment() = default;  // none: indirect peers stay refused
  // Takes what open_engine_over_host_memory / open_engine_over_device_memory opened.
  explicit EngineAttachment(OpenEngine engine) : engine_(std::move(engine)) {}
  EngineAttachment(EngineAttachment&& other) noexcept : engine_(std::exchange(other.engine_, OpenEngine{})) {}
  EngineAttachment& operator=(EngineAttachment&& other) noexcept {
    if (this != &other) {
      release();
      engine_ = std::exchange(other.engine_, OpenEngine{});
    }
    return *this;
  }
  EngineAttachment(const EngineAttachment&) = delete;
  EngineAttachment& operator=(const EngineAttachment&) = delete;
  ~EngineAttachment() { release(); }

  explicit operator bool() const { return static_cast<bool>(engine_); }

  // Gives `map`, a map of memory that starts `offset` bytes into the range, the engine for its
  // indirect peers (and keeps the engine alive as long as the map). Nothing when none is open.
  void attach(const SymmetricAddressMap& map, std::uint64_t offset) const {
    if (engine_) map.attach_engine(engine_.at(offset), engine_.owner);
  }

  // Collective. Closes the engine; what the close throws reaches the caller. Every map's channel
  // refuses from then on.
  void close() {
    OpenEngine engine = std::exchange(engine_, OpenEngine{});
    if (engine) close_engine(engine);
  }

  // Collective unless an exception is unwinding or the job watch reports a lost rank (a survivor's
  // teardown after the error: the dead rank would never join MPI_Win_free), when the engine is
  // only dropped. Never throws: a close that fails leaves nothing more to do, and the memory goes
  // anyway.
  void release() noexcept {
    OpenEngine engine = std::exchange(engine_, OpenEngine{});
    if (!engine || std::uncaught_exceptions() > 0 || job_failed()) return;
    try {
      close_engine(engine);
    } catch (...) {  // nothing to do about it here
    }
  }

  // Drops the engine without the collective close (its maps' channels stay as they are).
  void abandon() noexcept { engine_ = OpenEngine{}; }

 private:
  static bool job_failed() noexcept {
    try {
      return !reported_job_failure().empty();
    } catch (...) {  // no memory for the message: close as if all were well
      return false;
    }
  }

  OpenEngine engine_;
};

}  // namespace aperture::detail
