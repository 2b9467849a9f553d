// src/bootstrap/wire.h — the messages between a rank and the rendezvous hub.
//
// Fixed-size headers in host byte order (a job runs on one architecture), each opened by a
// magic number and version so a stranger or a rank of another aperture version is refused
// instead of misread. Every length is checked against a cap before anything is allocated.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace aperture::detail::wire {

inline constexpr std::uint32_t kMagic = 0x41505452;  // "APTR"
inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::uint64_t kMaxPayload = std::uint64_t{1} << 32;  // 4 GiB per rank and call
inline constexpr std::size_t kTokenBytes = 64;
inline constexpr std::size_t kHostBytes = 64;
inline constexpr int kMaxWorldSize = 1 << 16;

enum class Op : std::uint32_t { barrier = 1, allgather = 2, broadcast = 3, goodbye = 4 };

inline const char* op_name(Op op) {
  switch (op) {
    case Op::barrier: return "barrier";
    case Op::allgather: return "allgather";
    case Op::broadcast: return "broadcast";
    case Op::goodbye: return "leave (Team destroyed)";
  }
  return "unknown operation";
}

struct Hello {
  std::uint32_t magic = kMagic;
  std::uint32_t version = kVersion;
  std::int32_t rank = 0;
  std::int32_t world_size = 0;
  std::int32_t pid = 0;
  std::int32_t reserved = 0;
  char token[kTokenBytes] = {};
  char host[kHostBytes] = {};
};

struct HelloReply {
  std::uint32_t magic = kMagic;
  std::int32_t status = 0;      // 0: accepted; otherwise an error text of `text_bytes` follows
  std::uint64_t text_bytes = 0;
};

struct Request {
  std::uint32_t magic = kMagic;
  Op op = Op::barrier;
  std::uint64_t seq = 0;   // the rank's collective call number, from 1
  std::int32_t root = -1;  // broadcast only
  std::uint32_t reserved = 0;
  std::uint64_t bytes = 0;          // per-rank size of the operation
  std::uint64_t payload_bytes = 0;  // bytes that follow this header
};

struct Reply {
  std::uint32_t magic = kMagic;
  std::int32_t status = 0;  // 0: payload is the result; otherwise payload is an error text
  std::uint64_t seq = 0;    // the call answered; 0: unasked, the job failed (status != 0)
  std::uint64_t payload_bytes = 0;
};

static_assert(std::is_trivially_copyable_v<Hello> && std::is_trivially_copyable_v<Request> &&
              std::is_trivially_copyable_v<Reply> && std::is_trivially_copyable_v<HelloReply>,
              "wire messages are sent as raw bytes");

// Copies a string into a fixed field, always NUL-terminated (truncating if needed).
template <std::size_t N>
void set_field(char (&field)[N], const std::string& value) {
  const std::size_t n = value.size() < N - 1 ? value.size() : N - 1;
  std::memcpy(field, value.data(), n);
  field[n] = '\0';
}

template <std::size_t N>
std::string get_field(const char (&field)[N]) {
  return std::string(field, ::strnlen(field, N));
}

// Checks a hello as the hub receives it; returns the reason to refuse it, or empty.
std::string validate_hello(const Hello& hello, int world_size, const std::string& token);
// Checks a request header; returns the reason to refuse it, or empty.
std::string validate_request(const Request& request, int world_size);

}  // namespace aperture::detail::wire
