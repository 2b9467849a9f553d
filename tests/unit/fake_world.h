// tests/unit/fake_world.h — several "ranks" simulated in one process for the host tests of the
// device operations: each rank's copy of an allocation is its own array and the table holds their
// addresses, so a wrong peer or offset lands in the wrong array and shows as a wrong value.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace test {

template <class T, int Ranks, std::size_t Count>
struct FakeWorld {
  std::array<std::vector<T>, Ranks> copies;
  std::array<std::int64_t, Ranks> bases{};

  FakeWorld() {
    for (int r = 0; r < Ranks; ++r) {
      copies[r].resize(Count);
      for (std::size_t i = 0; i < Count; ++i) copies[r][i] = value(r, i);
      bases[r] = reinterpret_cast<std::int64_t>(copies[r].data());
    }
  }
  // Differs per rank and per element.
  static T value(int rank, std::size_t i) { return static_cast<T>(1000 * (rank + 1) + static_cast<int>(i)); }
  T* local(int rank) { return copies[rank].data(); }
};

}  // namespace test
