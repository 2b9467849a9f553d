// src/bootstrap/wire.h — the messages between a rank and the rendezvous hub.
//
// Fixed-size headers in host byte order (a job runs on one architecture), each opened by a
// magic number and version so a stranger or a rank of another aperture version is refused
// instead of misread. Every length is checked against a cap before anything is allocated.
//
// The handshake authenticates both ends on the job token, which never crosses the wire
// (bootstrap/job_proof.h):
//   rank -> hub   Hello      (rank, world size, the rank's fresh challenge)
//   hub  -> rank  HubHello   (a refusal with its text, or the hub's proof and its own challenge)
//   rank -> hub   RankProof  (sent only once the hub's proof checked out)
//   hub  -> rank  HelloReply (accepted, or refused with its text)
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "bootstrap/job_proof.h"

namespace aperture::detail::wire {

inline constexpr std::uint32_t kMagic = 0x41505452;  // "APTR"
inline constexpr std::uint32_t kVersion = 2;  // 2: mutual challenge on the job token
inline constexpr std::uint64_t kMaxPayload = std::uint64_t{1} << 32;  // 4 GiB per rank and call
// The most one answer may carry (an allgather's bytes x ranks): every rank and the hub hold all of it.
inline constexpr std::uint64_t kMaxAnswer = std::uint64_t{1} << 32;
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
  Challenge challenge = {};  // the hub must answer it with its proof
  char host[kHostBytes] = {};
};

// The hub's answer to a hello: a refusal (status != 0, an error text of `text_bytes` follows), or
// its proof of the token for the rank's challenge and its own challenge for the rank.
struct HubHello {
  std::uint32_t magic = kMagic;
  std::int32_t status = 0;
  std::uint64_t text_bytes = 0;
  Challenge challenge = {};
  Proof proof = {};
};

// The rank's proof of the token for the hub's challenge.
struct RankProof {
  std::uint32_t magic = kMagic;
  std::uint32_t reserved = 0;
  Proof proof = {};
};

// The hub's verdict on the rank's proof.
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
              std::is_trivially_copyable_v<Reply> && std::is_trivially_copyable_v<HelloReply> &&
              std::is_trivially_copyable_v<HubHello> && std::is_trivially_copyable_v<RankProof>,
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

// Checks a hello as the hub receives it (magic, version, world size, rank in range); returns the
// reason to refuse it, or empty. The token is judged later, on the rank's proof.
std::string validate_hello(const Hello& hello, int world_size);
// Checks a rank's proof for this connection's challenges; returns the reason to refuse it, or empty.
std::string validate_rank_proof(const RankProof& proof, const Hello& hello, const Challenge& hub_challenge,
                                const std::string& token);
// Checks a request header; returns the reason to refuse it, or empty.
std::string validate_request(const Request& request, int world_size);

}  // namespace aperture::detail::wire
