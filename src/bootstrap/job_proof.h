// src/bootstrap/job_proof.h — proof of knowing the job token, without sending it.
//
// A rank and its hub each prove to the other that they hold the job's token by answering the
// other's fresh random challenge with HMAC-SHA-256(token, label | rank's challenge | hub's
// challenge | rank | world size). The labels differ by direction, so an answer one side gave can
// never be replayed as the other side's; the challenges are fresh for each connection, so an
// answer seen once is worth nothing later. The token itself never crosses the wire.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace aperture::detail {

inline constexpr std::size_t kChallengeBytes = 32;
inline constexpr std::size_t kProofBytes = 32;

using Challenge = std::array<std::uint8_t, kChallengeBytes>;
using Proof = std::array<std::uint8_t, kProofBytes>;

// Which side proves: the hub to a rank, or a rank to the hub.
enum class Prover { hub, rank };

// SHA-256 of `bytes` (FIPS 180-4).
std::array<std::uint8_t, 32> sha256(const std::string& bytes);
// HMAC-SHA-256 (RFC 2104) of `message` under `key`.
std::array<std::uint8_t, 32> hmac_sha256(const std::string& key, const std::string& message);

// The answer `prover` gives for this connection's two challenges.
Proof job_proof(Prover prover, const std::string& token, const Challenge& rank_challenge,
                const Challenge& hub_challenge, std::int32_t rank, std::int32_t world_size);

// Compares every byte, whatever differs first, so timing reveals nothing of the expected proof.
bool same_proof(const Proof& a, const Proof& b);

// A fresh challenge from the kernel's random source (getrandom).
Challenge make_challenge();

}  // namespace aperture::detail
