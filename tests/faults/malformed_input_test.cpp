// Single-process checks of the fixes the fuzzers led to (tests/fuzz/regressions keeps the inputs
// themselves): each used to be accepted, or to crash, and is now refused with an aperture::Error
// or a refusal text, or accepted where it used to be refused.
#include <gtest/gtest.h>

#include <aperture/aperture.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../common/error_of.h"
#include "bootstrap/wire.h"

namespace {

using aperture::SymmetricAddressMap;
namespace wire = aperture::detail::wire;

using test::error_of;

// fuzz_address_map found these: a table whose copies run past the signed 64-bit address range
// made translate() overflow (undefined behaviour) for in-range pointers.
TEST(MalformedInput, TablesOutsideTheAddressSpaceAreRefused) {
  const std::int64_t top = std::numeric_limits<std::int64_t>::max();
  EXPECT_NE(error_of([&] { SymmetricAddressMap::from_table("t", 0, {0x1000, top - 10}, 64); }).find("rank 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { SymmetricAddressMap::from_table("t", 0, {0x1000, -4096}, 64); }).find("not a range"),
            std::string::npos);
  EXPECT_NE(error_of([&] { SymmetricAddressMap::from_table("t", 0, {top - 10}, 64); }).find("rank 0"),
            std::string::npos);
  EXPECT_NO_THROW(SymmetricAddressMap::from_table("t", 0, {top - 64, 0}, 64));
}

// fuzz_address_map found this: count * sizeof(T) wrapped to a small number and passed the check.
TEST(MalformedInput, CheckedTranslateCountsDoNotWrap) {
  std::vector<std::uint64_t> mine(512), theirs(512);
  const auto map = SymmetricAddressMap::from_table(
      "t", 0, {reinterpret_cast<std::int64_t>(mine.data()), reinterpret_cast<std::int64_t>(theirs.data())},
      mine.size() * sizeof(std::uint64_t));
  const std::size_t wraps = (std::size_t{1} << 61);  // * 8 == 2^64 == 0
  EXPECT_NE(error_of([&] { aperture::checked_translate(map, mine.data(), 1, wraps); }).find("more than the address space"),
            std::string::npos);
  EXPECT_EQ(aperture::checked_translate(map, mine.data(), 1, 512), theirs.data());
}

// fuzz_wire found this: a job token of 64 bytes or more refused every rank (the rank sent at
// most 63 bytes of it, the hub compared all of it). Now the token is the key of both proofs,
// whole, on both sides: every length is accepted, and every byte of it counts.
TEST(MalformedInput, LongJobTokensAreAccepted) {
  using aperture::detail::Prover;
  for (std::size_t length : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{200}}) {
    const std::string token(length, 't');
    wire::Hello hello;
    hello.rank = 0;
    hello.world_size = 2;
    hello.challenge = aperture::detail::make_challenge();
    const auto hub_challenge = aperture::detail::make_challenge();
    wire::RankProof proof;
    proof.proof = job_proof(Prover::rank, token, hello.challenge, hub_challenge, 0, 2);
    EXPECT_EQ(wire::validate_rank_proof(proof, hello, hub_challenge, token), "") << length << "-byte token";
    EXPECT_NE(wire::validate_rank_proof(proof, hello, hub_challenge, token + "x").find("wrong job token"),
              std::string::npos)
        << length;
  }
}

// fuzz_wire found this: barrier and goodbye requests could carry up to 4 GiB the hub would buffer.
TEST(MalformedInput, BarrierAndGoodbyeCarryNoPayload) {
  for (auto op : {wire::Op::barrier, wire::Op::goodbye}) {
    wire::Request request;
    request.op = op;
    EXPECT_EQ(wire::validate_request(request, 2), "");
    request.payload_bytes = 16;
    EXPECT_NE(wire::validate_request(request, 2).find("carries 16 payload bytes"), std::string::npos);
    request.payload_bytes = 0;
    request.bytes = 8;
    EXPECT_NE(wire::validate_request(request, 2), "");
  }
}

}  // namespace
