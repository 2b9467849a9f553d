// fuzz_wire: the hub's checks of what a rank sends it, on raw bytes.
//
// Input: byte 0 picks the world size (1..8), byte 1 the message kind; the rest is the message
// (a Hello or a Request, as raw bytes, short input zero-filled) and, for a hello, the job token
// the hub expects. Properties:
//   - validate_hello accepts exactly a hello with our magic and version, the hub's world size, a
//     rank in range and the hub's token; and a hello built as HubClient builds it, with the hub's
//     own token, is always accepted (whatever the token's length);
//   - validate_request accepts only headers the hub can act on: a known operation, sizes under
//     the cap, a broadcast root in range, payloads that match their declared size, and no
//     payload at all for barrier and goodbye.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "bootstrap/wire.h"
#include "fuzz_check.h"

using namespace aperture::detail::wire;

namespace {

void hello_case(const std::uint8_t* data, std::size_t size, int world_size) {
  Hello hello;
  std::memset(&hello, 0, sizeof hello);
  std::memcpy(&hello, data, std::min(size, sizeof hello));
  const std::string token = size > sizeof hello ? std::string(reinterpret_cast<const char*>(data) + sizeof hello,
                                                              std::min<std::size_t>(size - sizeof hello, 200))
                                                : std::string();
  const std::string verdict = validate_hello(hello, world_size, token);
  if (verdict.empty()) {
    FUZZ_CHECK(hello.magic == kMagic && hello.version == kVersion, "accepted a hello with a bad magic or version");
    FUZZ_CHECK(hello.world_size == world_size, "accepted world size %d for a hub of %d", hello.world_size, world_size);
    FUZZ_CHECK(hello.rank >= 0 && hello.rank < world_size, "accepted rank %d of %d", hello.rank, world_size);
    const std::string presented = get_field(hello.token);
    FUZZ_CHECK(presented == token.substr(0, kTokenBytes - 1), "accepted a token that is not the job's");
  }
  // What a well-behaved rank sends (HubClient's constructor) is accepted, whatever the token.
  Hello good;
  good.rank = world_size - 1;
  good.world_size = world_size;
  if (token.find('\0') == std::string::npos) {
    set_field(good.token, token);
    const std::string refusal = validate_hello(good, world_size, token);
    FUZZ_CHECK(refusal.empty(), "refused a well-formed hello with the job's own %zu-byte token: %s", token.size(),
               refusal.c_str());
  }
}

void request_case(const std::uint8_t* data, std::size_t size, int world_size) {
  Request request;
  std::memset(&request, 0, sizeof request);
  std::memcpy(&request, data, std::min(size, sizeof request));
  if (size < 4) request.magic = kMagic;  // short inputs explore the other fields
  const std::string verdict = validate_request(request, world_size);
  (void)op_name(request.op);
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
  const bool hello = data[1] % 2 == 0;
  if (hello) hello_case(data + 2, size - 2, world_size);
  else request_case(data + 2, size - 2, world_size);
  return 0;
}
