// src/engines/nvshmem_engine.cpp — NVSHMEM's memory reached through NVSHMEM's own host API
// (nvshmem_engine.h says which call each operation becomes).
//
// Calls into NVSHMEM from one process are serialised by one mutex: NVSHMEM starts at
// NVSHMEM_THREAD_SERIALIZED, and the caller may be any host thread (a GPU proxy's among them).
// A program that makes NVSHMEM calls of its own on other threads at the same time must
// serialise them with these itself.
#include <cuda_runtime_api.h>
#include <nvshmem_host.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "aperture/engine_channel.h"
#include "aperture/error.h"
#include "common/cuda_check.h"
#include "common/format.h"
#include "engines/apply_request.h"
#include "engines/nvshmem_engine.h"
#include "providers/cuda/current_device.h"

namespace aperture::detail {

namespace {

// Puts and gets go in pieces of this many bytes through the staging.
constexpr std::size_t kStagingBytes = std::size_t{1} << 20;

std::mutex& nvshmem_calls() {
  static std::mutex* mutex = new std::mutex;  // never destroyed: engines may close at exit
  return *mutex;
}

struct Engine {
  char* base = nullptr;     // this rank's copy; a peer's is at the same symmetric address
  std::uint64_t bytes = 0;
  int device = -1;
  void* staging = nullptr;  // pinned, registered with NVSHMEM; made at the first put or get
  std::atomic<bool> closed{false};

  ~Engine() {
    if (staging == nullptr) return;
    // Unregistered only while NVSHMEM runs; after its finalize the registration went with it.
    if (nvshmemx_init_status() >= NVSHMEM_STATUS_IS_INITIALIZED) (void)nvshmemx_buffer_unregister(staging);
    (void)cudaFreeHost(staging);
  }
};

const char* op_name(EngineOp op) {
  static const char* const names[] = {"put", "get", "atomic", "compare-and-swap", "signal"};
  return names[static_cast<int>(op)];
}

Error engine_error(ErrorCode code, const EngineRequest& r, const std::string& what) {
  return Error(code, format("nvshmem engine: {} of {} bytes at offset {} of rank {}: {}", op_name(r.op),
                            r.bytes ? r.bytes : r.element_bytes, r.offset, r.peer, what));
}

void* staging_of(Engine& e, const EngineRequest& r) {
  if (e.staging != nullptr) return e.staging;
  void* staging = nullptr;
  if (std::string why = APERTURE_CUDA_TRY(cudaHostAlloc(&staging, kStagingBytes, cudaHostAllocPortable));
      !why.empty())
    throw engine_error(ErrorCode::out_of_memory, r, "pinned staging: " + why);
  if (const int rc = nvshmemx_buffer_register(staging, kStagingBytes); rc != 0) {
    (void)cudaFreeHost(staging);
    throw engine_error(ErrorCode::system, r, format("nvshmemx_buffer_register of the staging failed ({})", rc));
  }
  e.staging = staging;
  return staging;
}

// The element's bits at `dest` on `pe`, as NVSHMEM's unsigned atomics of that width see them.
template <class U>
struct Amo;
template <>
struct Amo<std::uint32_t> {
  using U = std::uint32_t;
  static U fetch(U* d, int pe) { return nvshmem_uint32_atomic_fetch(d, pe); }
  static U fetch_add(U* d, U v, int pe) { return nvshmem_uint32_atomic_fetch_add(d, v, pe); }
  static U fetch_and(U* d, U v, int pe) { return nvshmem_uint32_atomic_fetch_and(d, v, pe); }
  static U fetch_or(U* d, U v, int pe) { return nvshmem_uint32_atomic_fetch_or(d, v, pe); }
  static U fetch_xor(U* d, U v, int pe) { return nvshmem_uint32_atomic_fetch_xor(d, v, pe); }
  static U swap(U* d, U v, int pe) { return nvshmem_uint32_atomic_swap(d, v, pe); }
  static U compare_swap(U* d, U expected, U v, int pe) { return nvshmem_uint32_atomic_compare_swap(d, expected, v, pe); }
};
template <>
struct Amo<std::uint64_t> {
  using U = std::uint64_t;
  static U fetch(U* d, int pe) { return nvshmem_uint64_atomic_fetch(d, pe); }
  static U fetch_add(U* d, U v, int pe) { return nvshmem_uint64_atomic_fetch_add(d, v, pe); }
  static U fetch_and(U* d, U v, int pe) { return nvshmem_uint64_atomic_fetch_and(d, v, pe); }
  static U fetch_or(U* d, U v, int pe) { return nvshmem_uint64_atomic_fetch_or(d, v, pe); }
  static U fetch_xor(U* d, U v, int pe) { return nvshmem_uint64_atomic_fetch_xor(d, v, pe); }
  static U swap(U* d, U v, int pe) { return nvshmem_uint64_atomic_swap(d, v, pe); }
  static U compare_swap(U* d, U expected, U v, int pe) { return nvshmem_uint64_atomic_compare_swap(d, expected, v, pe); }
};

// One atomic on the word at `dest` of `pe`: NVSHMEM's own where it has one for the operation,
// otherwise a compare-and-swap loop whose next value the library's own atomic computes on a
// local copy of the word (so min, max and floating arithmetic mean what they mean directly).
template <class U>
U atomic_on(U* dest, const EngineRequest& r) {
  const int pe = r.peer;
  const U value = static_cast<U>(r.value);
  if (r.op == EngineOp::compare_swap) return Amo<U>::compare_swap(dest, static_cast<U>(r.compare), value, pe);
  const bool integer = r.element != EngineElement::floating;
  switch (r.atomic) {
    case EngineAtomic::add:
      if (integer) return Amo<U>::fetch_add(dest, value, pe);  // two's complement: signed too
      break;
    case EngineAtomic::sub:
      if (integer) return Amo<U>::fetch_add(dest, static_cast<U>(U{0} - value), pe);
      break;
    case EngineAtomic::band: return Amo<U>::fetch_and(dest, value, pe);
    case EngineAtomic::bor: return Amo<U>::fetch_or(dest, value, pe);
    case EngineAtomic::bxor: return Amo<U>::fetch_xor(dest, value, pe);
    case EngineAtomic::replace: return Amo<U>::swap(dest, value, pe);
    case EngineAtomic::min:
    case EngineAtomic::max: break;
  }
  U old = Amo<U>::fetch(dest, pe);
  for (;;) {
    U next = old;
    std::uint64_t ignored = 0;
    if (apply_atomic(&next, r, &ignored) != ApplyStatus::ok)
      throw engine_error(ErrorCode::invalid_argument, r, "a bitwise atomic on a floating-point element");
    if (next == old) return old;  // the word stays as it is (a min above it): the fetch was atomic
    const U seen = Amo<U>::compare_swap(dest, old, next, pe);
    if (seen == old) return old;
    old = seen;
  }
}

void carry_out(void* context, const EngineRequest& r, void* result) {
  Engine& e = *static_cast<Engine*>(context);
  if (e.closed.load(std::memory_order_acquire))
    throw engine_error(ErrorCode::invalid_argument, r,
                       "its allocation was freed; keep views and maps only while their allocation lives");
  const bool data = r.op == EngineOp::put || r.op == EngineOp::get;
  const std::uint64_t touched = data ? r.bytes : r.op == EngineOp::signal ? sizeof(std::uint64_t) : r.element_bytes;
  if (r.offset > e.bytes || touched > e.bytes - r.offset)
    throw engine_error(ErrorCode::invalid_argument, r,
                       format("the access lies outside the peer's {} bytes; keep the pointers inside the allocation "
                              "the view describes",
                              e.bytes));
  if (!data && r.op != EngineOp::signal && r.element_bytes != 4 && r.element_bytes != 8)
    throw engine_error(ErrorCode::invalid_argument, r, "atomics take 4- or 8-byte elements");
  if (nvshmemx_init_status() < NVSHMEM_STATUS_IS_INITIALIZED)
    throw engine_error(ErrorCode::unavailable, r, "NVSHMEM is not running (finalized at exit?)");

  std::lock_guard lock(nvshmem_calls());
  CurrentDevice on(e.device, "nvshmem engine");
  char* remote = e.base + r.offset;  // the symmetric address: the same on every PE
  switch (r.op) {
    case EngineOp::put:
    case EngineOp::get: {
      char* staging = static_cast<char*>(staging_of(e, r));
      char* local = static_cast<char*>(const_cast<void*>(r.local));
      for (std::uint64_t done = 0; done < r.bytes; done += kStagingBytes) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kStagingBytes, r.bytes - done));
        // cudaMemcpyDefault: the local buffer may be host or GPU memory.
        if (r.op == EngineOp::put) {
          if (auto why = APERTURE_CUDA_TRY(cudaMemcpy(staging, local + done, n, cudaMemcpyDefault)); !why.empty())
            throw engine_error(ErrorCode::system, r, why);
          nvshmem_putmem(remote + done, staging, n, r.peer);
          nvshmem_quiet();  // landed at the target before the staging is reused, or the call returns
        } else {
          nvshmem_getmem(staging, remote + done, n, r.peer);  // blocking: delivered on return
          if (auto why = APERTURE_CUDA_TRY(cudaMemcpy(local + done, staging, n, cudaMemcpyDefault)); !why.empty())
            throw engine_error(ErrorCode::system, r, why);
        }
      }
      return;
    }
    case EngineOp::fetch_op:
    case EngineOp::compare_swap: {
      const std::uint64_t old = r.element_bytes == 8
                                    ? atomic_on(reinterpret_cast<std::uint64_t*>(remote), r)
                                    : atomic_on(reinterpret_cast<std::uint32_t*>(remote), r);
      nvshmem_quiet();
      if (result != nullptr) std::memcpy(result, &old, r.element_bytes);  // the low bytes, little-endian
      return;
    }
    case EngineOp::signal:
      nvshmem_quiet();  // every earlier operation of this PE has completed first
      nvshmem_uint64_atomic_set(reinterpret_cast<std::uint64_t*>(remote), r.value, r.peer);
      nvshmem_quiet();
      return;
  }
}

void close_nvshmem_engine(OpenEngine& opened) {
  auto engine = std::static_pointer_cast<Engine>(std::const_pointer_cast<void>(opened.owner));
  opened = {};
  if (engine) engine->closed.store(true, std::memory_order_release);
  // The staging goes with the last owner (a map may still hold the engine; its calls refuse).
}

}  // namespace

OpenEngine open_nvshmem_engine(void* local_base, std::size_t bytes, int device) {
  auto engine = std::make_shared<Engine>();
  engine->base = static_cast<char*>(local_base);
  engine->bytes = bytes;
  engine->device = device;
  OpenEngine opened;
  opened.channel.context = engine.get();
  opened.channel.host_call = &carry_out;
  opened.owner = engine;
  opened.close = &close_nvshmem_engine;
  return opened;
}

}  // namespace aperture::detail
