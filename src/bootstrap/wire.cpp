#include "bootstrap/wire.h"

#include "detail/format.h"

namespace aperture::detail::wire {

std::string validate_hello(const Hello& hello, int world_size, const std::string& token) {
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
  // A rank sends at most kTokenBytes - 1 bytes of the token (set_field truncates), so that is
  // what the hub compares; a longer token used to refuse every rank. Compare every byte,
  // whatever matches first, so timing reveals nothing of the token.
  const std::string expected = token.substr(0, kTokenBytes - 1);
  const std::string presented = get_field(hello.token);
  unsigned char difference = presented.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i)
    difference |= static_cast<unsigned char>(expected[i] ^ (i < presented.size() ? presented[i] : 0));
  if (difference != 0) return "wrong job token: this rank belongs to another job";
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
  if (request.op == Op::allgather && request.payload_bytes != request.bytes)
    return "allgather payload does not match its declared size";
  if (request.op == Op::broadcast && request.payload_bytes != 0 && request.payload_bytes != request.bytes)
    return "broadcast payload does not match its declared size";
  return {};
}

}  // namespace aperture::detail::wire
