// The checked build on the host: every bad access of checked_cases.h throws an aperture::Error
// that names what was wrong, before any memory is touched, and correct code runs unchanged.
// Built with APERTURE_CHECKED=1 (its own executable: the checks change inline functions).
#include <gtest/gtest.h>

#include <aperture/aperture.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checked_cases.h"

namespace {

using checked_cases::kSlots;
using checked_cases::kWorld;

// Three ranks' copies in one process, rank 2 not direct; every slot distinct per rank.
struct World {
  std::array<std::vector<std::int64_t>, kWorld> copies;
  std::array<std::int64_t, kWorld> bases{};
  std::vector<std::int64_t> local = std::vector<std::int64_t>(kSlots, -1);

  World() {
    for (int r = 0; r < kWorld; ++r) {
      copies[r].resize(kSlots);
      for (std::size_t i = 0; i < kSlots; ++i) copies[r][i] = initial(r, i);
      bases[r] = r == checked_cases::kIndirect ? 0 : reinterpret_cast<std::int64_t>(copies[r].data());
    }
  }
  static std::int64_t initial(int rank, std::size_t i) { return 100000 * (rank + 1) + static_cast<std::int64_t>(i); }
  aperture::PeerView view() const { return {checked_cases::kMe, kWorld, bases.data(), checked_cases::kExtent}; }
  std::int64_t* mine() { return copies[checked_cases::kMe].data(); }
  bool untouched() const {
    for (int r = 0; r < kWorld; ++r)
      for (std::size_t i = 0; i < kSlots; ++i)
        if (copies[r][i] != initial(r, i)) return false;
    return true;
  }
};

TEST(CheckedOperations, EveryBadAccessThrowsNamingTheProblemAndWritesNothing) {
  for (int id = 0; id < checked_cases::kCaseCount; ++id) {
    const auto& c = checked_cases::kCases[id];
    World w;
    std::string message;
    std::optional<aperture::ErrorCode> code;
    try {
      checked_cases::run_bad_case(id, w.view(), w.mine(), w.local.data());
    } catch (const aperture::Error& e) {
      message = e.what();
      code = e.code();
    }
    EXPECT_EQ(code, aperture::ErrorCode::invalid_argument) << c.name << ": got \"" << message << "\"";
    EXPECT_EQ(message.rfind("aperture: checked access refused: ", 0), 0U) << c.name << ": got \"" << message << "\"";
    EXPECT_NE(message.find(c.reason), std::string::npos) << c.name << ": got \"" << message << "\"";
    EXPECT_NE(message.find("to_rank="), std::string::npos) << c.name << ": " << message;
    EXPECT_TRUE(w.untouched()) << "case '" << c.name << "' wrote memory before it was stopped";
  }
}

TEST(CheckedOperations, CorrectCodeRunsUnchanged) {
  World w;
  checked_cases::run_good_ops(w.view(), w.mine(), w.local.data());
  for (std::size_t i = 0; i < kSlots; ++i) {
    EXPECT_EQ(w.copies[1][i], checked_cases::good_value(i)) << "rank 1 slot " << i;
    EXPECT_EQ(w.copies[0][i], World::initial(0, i)) << "rank 0 slot " << i;
    EXPECT_EQ(w.copies[2][i], World::initial(2, i)) << "rank 2 slot " << i;
  }
  for (std::size_t i = 80; i < kSlots; ++i) EXPECT_EQ(w.local[i], World::initial(1, i)) << "got slot " << i;
}

TEST(CheckedOperations, AMapsViewCarriesTheAllocationLength) {
  World w;
  const std::vector<std::int64_t> table(w.bases.begin(), w.bases.end());
  const auto map = aperture::SymmetricAddressMap::from_table("test", checked_cases::kMe, table, 40 * sizeof(std::int64_t));
  const aperture::PeerView view = map.peer_view();
  EXPECT_EQ(view.extent, 40 * sizeof(std::int64_t));
  view.put(w.mine() + 30, w.local.data(), 10, 1);  // up to the last byte: fine
  EXPECT_EQ(w.copies[1][39], -1);
  EXPECT_THROW(view.put(w.mine() + 31, w.local.data(), 10, 1), aperture::Error);
  EXPECT_EQ(w.copies[1][40], World::initial(1, 40));
}

TEST(CheckedOperations, AViewWithoutALengthChecksRanksAndTheDirectBitOnly) {
  World w;
  aperture::PeerView view = w.view();
  view.extent = 0;
  view.store(w.mine() + kSlots - 1, std::int64_t{9}, 1);
  EXPECT_EQ(w.copies[1][kSlots - 1], 9);
  EXPECT_THROW(view.store(w.mine(), std::int64_t{9}, kWorld), aperture::Error);
  EXPECT_THROW(view.store(w.mine(), std::int64_t{9}, checked_cases::kIndirect), aperture::Error);
}

}  // namespace
