// src/engines/target_memory.h — what the message engine does to this rank's own copy when a rank
// on another node asks (src/engines/message_engine.cpp): the one part of the engine that depends
// on where the memory is.
//
// Host memory is handed to MPI as it is: a put is received straight into it, a get sent straight
// from it, atomics are the library's host atomics. GPU memory cannot be handed to an MPI that is
// not CUDA-aware (Debian's Open MPI is not), so its data goes through pinned host staging and
// the CUDA runtime, and its atomics and signals run in a one-thread kernel, at system scope
// (src/engines/device_target_memory.cu).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "aperture/engine_request.h"

namespace aperture::detail {

class TargetMemory {
 public:
  virtual ~TargetMemory() = default;
  // "host memory", "GPU memory on device 0": for messages.
  virtual std::string describe() const = 0;
  // Where MPI may receive a put's bytes or send a get's bytes at `offset` directly; nullptr when
  // the memory is not MPI's to touch, and the data goes through staging().
  virtual void* direct(std::uint64_t offset) = 0;
  // Pinned host memory of staging_bytes() for the data of one piece (GPU memory only).
  virtual void* staging() = 0;
  virtual std::uint64_t staging_bytes() const = 0;
  // The staging's first `bytes` into the memory at `offset`, and back; complete on return.
  virtual void write_from_staging(std::uint64_t offset, std::uint64_t bytes) = 0;
  virtual void read_into_staging(std::uint64_t offset, std::uint64_t bytes) = 0;
  // A fetch_op or compare_swap at request.offset: "" and the old value's bits, or what failed.
  virtual std::string atomic(const EngineRequest& request, std::uint64_t* old_bits) = 0;
  // A signal: the release store of `value` at `offset`, after every write before it.
  virtual std::string signal(std::uint64_t offset, std::uint64_t value) = 0;
  // On the origin: whether `local` (a put's source, a get's destination) may go to MPI as it is;
  // GPU memory may not, and the engine copies it through host memory (copy_local).
  virtual bool local_is_host(const void* local) const = 0;
  virtual void copy_local(void* to, const void* from, std::uint64_t bytes) const = 0;
};

// This rank's copy at `base`, in host memory.
std::unique_ptr<TargetMemory> host_target_memory(void* base);
// This rank's copy at `base`, in GPU memory of `device` (CUDA builds only).
std::unique_ptr<TargetMemory> device_target_memory(void* base, int device);

}  // namespace aperture::detail
