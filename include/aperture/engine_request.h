// aperture/engine_request.h — one operation for an engine, as a fixed-size value.
//
// What a PeerView hands to the engine for a peer that load/store cannot reach (see
// aperture/engine_channel.h): the operation, the peer, the byte offset from the start of the
// peer's copy, and the operands. It is trivially copyable: host code passes it to the engine
// directly, GPU threads copy it into a slot of the proxy queue (aperture/proxy_queue.h).
#pragma once

#include <cstdint>
#include <type_traits>

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

}  // namespace aperture
