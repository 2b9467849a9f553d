// fuzz_wire: the hub's checks of what a rank sends it, on raw bytes.
//
// Input: byte 0 picks the world size (1..8), byte 1 the message kind (0 hello, 1 request,
// 2 proof); the rest is the message as raw bytes, short input zero-filled:
//   hello    a Hello
//   request  a Request
//   proof    a Hello, the hub's challenge (32 bytes), a RankProof, then the job token
// Properties, in both directions (what is valid is accepted, what is not is refused):
//   - validate_hello accepts exactly a hello with our magic and version, the hub's world size and
//     a rank in range; a hello built as HubClient builds it is always accepted;
//   - validate_rank_proof accepts exactly the proof of the job's token for these challenges and
//     this rank; a proof built as HubClient builds it, with the job's token of any length, is
//     always accepted, and one built with any other token (the job's plus a byte) never is;
//   - validate_request accepts only headers the hub can act on: a known operation, sizes under
//     the caps (an allgather's bytes x ranks included), a broadcast root in range, payloads that
//     match their declared size, and no payload at all for barrier and goodbye; and a request
//     built as HubClient builds it, within those caps, is always accepted.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "bootstrap/job_proof.h"
#include "bootstrap/wire.h"
#include "fuzz_check.h"

using namespace aperture::detail;
using namespace aperture::detail::wire;

namespace {

template <class T>
T take(const std::uint8_t*& data, std::size_t& size) {
  T value;
  std::memset(&value, 0, sizeof value);
  const std::size_t n = std::min(size, sizeof value);
  std::memcpy(&value, data, n);
  data += n;
  size -= n;
  return value;
}

void hello_case(const std::uint8_t* data, std::size_t size, int world_size) {
  const Hello hello = take<Hello>(data, size);
  const std::string verdict = validate_hello(hello, world_size);
  const bool valid = hello.magic == kMagic && hello.version == kVersion && hello.world_size == world_size &&
                     hello.rank >= 0 && hello.rank < world_size;
  FUZZ_CHECK(verdict.empty() == valid, "validate_hello %s a hello (magic %x version %u world %d rank %d) for a hub of %d: %s",
             valid ? "refused" : "accepted", hello.magic, hello.version, hello.world_size, hello.rank, world_size,
             verdict.c_str());
  // What a well-behaved rank sends (HubClient's handshake) is accepted.
  Hello good;
  good.rank = world_size - 1;
  good.world_size = world_size;
  good.challenge = hello.challenge;
  FUZZ_CHECK(validate_hello(good, world_size).empty(), "refused a well-formed hello");
}

void proof_case(const std::uint8_t* data, std::size_t size, int world_size) {
  Hello hello = take<Hello>(data, size);
  const Challenge hub_challenge = take<Challenge>(data, size);
  const RankProof proof = take<RankProof>(data, size);
  const std::string token(reinterpret_cast<const char*>(data), std::min<std::size_t>(size, 200));
  const Proof expected = job_proof(Prover::rank, token, hello.challenge, hub_challenge, hello.rank, hello.world_size);
  const bool valid = proof.magic == kMagic && proof.proof == expected;
  const std::string verdict = validate_rank_proof(proof, hello, hub_challenge, token);
  FUZZ_CHECK(verdict.empty() == valid, "validate_rank_proof %s a proof: %s", valid ? "refused" : "accepted",
             verdict.c_str());
  // A rank of this job proves itself; a rank of another job (another token) never does.
  hello.rank = world_size - 1;
  hello.world_size = world_size;
  RankProof good;
  good.proof = job_proof(Prover::rank, token, hello.challenge, hub_challenge, hello.rank, hello.world_size);
  const std::string refusal = validate_rank_proof(good, hello, hub_challenge, token);
  FUZZ_CHECK(refusal.empty(), "refused the proof of the job's own %zu-byte token: %s", token.size(), refusal.c_str());
  FUZZ_CHECK(!validate_rank_proof(good, hello, hub_challenge, token + "x").empty(),
             "accepted a proof made with another token");
}

// The request HubClient::call builds for `op` (as its public calls pass it), or false when the
// rank itself refuses to send it (over a cap).
bool as_a_rank_builds_it(Op op, std::uint64_t bytes, int root, int world_size, Request* out) {
  Request request;
  request.op = op;
  request.seq = 1;
  switch (op) {
    case Op::barrier:
    case Op::goodbye: break;
    case Op::allgather:
      request.bytes = request.payload_bytes = bytes;
      if (bytes > kMaxPayload || bytes * static_cast<std::uint64_t>(world_size) > kMaxAnswer) return false;
      break;
    case Op::broadcast:
      request.bytes = bytes;
      request.root = root;
      request.payload_bytes = root == 0 ? bytes : 0;
      if (bytes > kMaxPayload) return false;
      break;
  }
  *out = request;
  return true;
}

void request_case(const std::uint8_t* data, std::size_t size, int world_size) {
  Request request;
  std::memset(&request, 0, sizeof request);
  std::memcpy(&request, data, std::min(size, sizeof request));
  if (size < 4) request.magic = kMagic;  // short inputs explore the other fields
  const std::string verdict = validate_request(request, world_size);
  (void)op_name(request.op);
  // The valid direction: the same operation, size and root, as a rank would send them.
  const Op op = static_cast<Op>(1 + static_cast<std::uint32_t>(request.op) % 4);
  const int root = static_cast<int>(static_cast<std::uint32_t>(request.root) % static_cast<std::uint32_t>(world_size));
  Request good;
  if (as_a_rank_builds_it(op, request.bytes % (kMaxPayload + 2), root, world_size, &good)) {
    const std::string refusal = validate_request(good, world_size);
    FUZZ_CHECK(refusal.empty(), "refused a %s of %llu bytes (root %d) built as a rank builds it: %s", op_name(op),
               static_cast<unsigned long long>(good.bytes), root, refusal.c_str());
  }
  if (!verdict.empty()) return;
  FUZZ_CHECK(request.magic == kMagic, "accepted a bad magic");
  const bool known = request.op == Op::barrier || request.op == Op::allgather || request.op == Op::broadcast ||
                     request.op == Op::goodbye;
  FUZZ_CHECK(known, "accepted unknown operation %u", static_cast<unsigned>(request.op));
  FUZZ_CHECK(request.bytes <= kMaxPayload && request.payload_bytes <= kMaxPayload, "accepted sizes over the cap");
  switch (request.op) {
    case Op::barrier:
    case Op::goodbye:
      FUZZ_CHECK(request.payload_bytes == 0 && request.bytes == 0, "accepted a %s carrying %llu payload bytes",
                 op_name(request.op), static_cast<unsigned long long>(request.payload_bytes));
      break;
    case Op::allgather:
      FUZZ_CHECK(request.payload_bytes == request.bytes, "accepted an allgather whose payload is not its size");
      FUZZ_CHECK(request.bytes * static_cast<std::uint64_t>(world_size) <= kMaxAnswer,
                 "accepted an allgather whose answer is over the cap");
      break;
    case Op::broadcast:
      FUZZ_CHECK(request.root >= 0 && request.root < world_size, "accepted broadcast root %d of %d", request.root,
                 world_size);
      FUZZ_CHECK(request.payload_bytes == 0 || request.payload_bytes == request.bytes,
                 "accepted a broadcast whose payload is neither empty nor its size");
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const int world_size = 1 + data[0] % 8;
  switch (data[1] % 3) {
    case 0: hello_case(data + 2, size - 2, world_size); break;
    case 1: request_case(data + 2, size - 2, world_size); break;
    case 2: proof_case(data + 2, size - 2, world_size); break;
  }
  return 0;
}
