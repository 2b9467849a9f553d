// tests/common/test_seed.h — the random inputs of the collectives' tests, and how a run replays them.
//
//     const std::uint64_t seed = test::agreed_seed(team);    // collective: rank 0's choice, everywhere
//     std::printf("...: seed %#" PRIx64 "\n", seed);          // the test prints it
//     std::uint64_t bits = test::draw(seed, rank, salt, i);   // rank's element i of buffer `salt`
//
// Rank 0 takes APERTURE_TEST_SEED when it is set, else a random seed, so every run draws other
// values and a failing one replays with APERTURE_TEST_SEED=<the printed seed>. draw() is a pure
// function of its arguments: any rank computes what any other rank holds, which is how the tests
// check every element they receive.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>

#include <aperture/team.h>

namespace test {

// splitmix64's finaliser: consecutive inputs give unrelated 64-bit outputs.
inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// 64 random bits for rank `rank`'s element i of the buffer a test numbered `salt`.
inline std::uint64_t draw(std::uint64_t seed, int rank, std::uint64_t salt, std::uint64_t i) {
  return mix(seed ^ mix(static_cast<std::uint64_t>(rank) * 0x100000001b3ull ^ mix(salt) ^ (i * 0x9e37ull)));
}

// Collective: the seed of this run, the same on every rank of `team`.
inline std::uint64_t agreed_seed(aperture::Team& team) {
  std::uint64_t seed = 0;
  if (team.rank() == 0) {
    const char* given = std::getenv("APERTURE_TEST_SEED");
    seed = given != nullptr && *given != '\0'
               ? std::strtoull(given, nullptr, 0)
               : (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  }
  team.broadcast(&seed, sizeof seed, 0);
  return seed;
}

}  // namespace test
