#include "bootstrap/wire.h"

#include "common/format.h"

namespace aperture::detail::wire {

std::string validate_hello(const Hello& hello, int world_size) {
  if (hello.magic != kMagic) return "not an aperture rank (bad magic number)";
  if (hello.version != kVersion)
    return detail::format("protocol version {} does not match the hub's {}; use one aperture build for every rank",
                  hello.version, kVersion);
  if (hello.world_size != world_size)
    return detail::format("rank {} believes the world has {} ranks, the hub serves {}; every rank must be given the same "
                  "world size",
                  hello.rank, hello.world_size, world_size);
  if (hello.rank < 0 || hello.rank >= world_size)
    return detail::format("rank {} is outside 0..{}", hello.rank, world_size - 1);
  return {};
}

std::string validate_rank_proof(const RankProof& proof, const Hello& hello, const Challenge& hub_challenge,
                                const std::string& token) {
  if (proof.magic != kMagic) return "not an aperture rank (bad magic number in its proof)";
  // The whole token is the key on both sides, whatever its length (a rank once sent only its
  // first 63 bytes, and a longer token refused every rank).
  const Proof expected = job_proof(Prover::rank, token, hello.challenge, hub_challenge, hello.rank, hello.world_size);
  if (!same_proof(proof.proof, expected))
    return "wrong job token: this rank belongs to another job (its proof of the token does not match)";
  return {};
}

std::string validate_request(const Request& request, int world_size) {
  if (request.magic != kMagic) return "corrupt request (bad magic number)";
  if (request.op != Op::barrier && request.op != Op::allgather && request.op != Op::broadcast &&
      request.op != Op::goodbye)
    return detail::format("unknown operation {}", static_cast<std::uint32_t>(request.op));
  if (request.bytes > kMaxPayload || request.payload_bytes > kMaxPayload)
    return detail::format("request of {} bytes exceeds the hub's limit of {} bytes per rank", request.bytes, kMaxPayload);
  if ((request.op == Op::barrier || request.op == Op::goodbye) && (request.bytes != 0 || request.payload_bytes != 0))
    return detail::format("{} carries {} payload bytes; it carries none", op_name(request.op), request.payload_bytes);
  if (request.op == Op::broadcast && (request.root < 0 || request.root >= world_size))
    return detail::format("broadcast root {} is outside 0..{}", request.root, world_size - 1);
  if (request.op == Op::allgather && request.bytes * static_cast<std::uint64_t>(world_size) > kMaxAnswer)
    return detail::format("allgather of {} bytes x {} ranks exceeds the hub's limit of {} bytes per answer",
                          request.bytes, world_size, kMaxAnswer);
  if (request.op == Op::allgather && request.payload_bytes != request.bytes)
    return "allgather payload does not match its declared size";
  if (request.op == Op::broadcast && request.payload_bytes != 0 && request.payload_bytes != request.bytes)
    return "broadcast payload does not match its declared size";
  return {};
}

}  // namespace aperture::detail::wire
