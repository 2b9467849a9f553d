#include <gtest/gtest.h>

#include <aperture/aperture.h>

#include <array>
#include <string>
#include <vector>

#include "../common/error_of.h"

namespace {

using aperture::SymmetricAddressMap;
using test::error_of;

struct ThreeRanks {
  std::array<std::vector<int>, 3> copies{std::vector<int>(64), std::vector<int>(64), std::vector<int>(64)};
  std::vector<std::int64_t> table() const {
    return {reinterpret_cast<std::int64_t>(copies[0].data()), reinterpret_cast<std::int64_t>(copies[1].data()),
            reinterpret_cast<std::int64_t>(copies[2].data())};
  }
};

TEST(AddressMap, HoldsTheInvariantAndDescribesItsAllocation) {
  ThreeRanks w;
  const auto map = SymmetricAddressMap::from_table("test", 1, w.table(), 64 * sizeof(int));
  EXPECT_EQ(map.local_rank, 1);
  EXPECT_EQ(map.world_size, 3);
  EXPECT_EQ(map.allocation_base, reinterpret_cast<std::uintptr_t>(w.copies[1].data()));
  EXPECT_EQ(map.host_peer_bases()[1], static_cast<std::int64_t>(map.allocation_base));
  EXPECT_EQ(map.peer_bases(), map.host_peer_bases().data()) << "host providers' kernels read the host table";
  EXPECT_TRUE(map.all_direct());
  EXPECT_TRUE(map.indirect_peers().empty());
  EXPECT_TRUE(map.owns(w.copies[1].data()));
  EXPECT_TRUE(map.owns(w.copies[1].data() + 63, sizeof(int)));
  EXPECT_FALSE(map.owns(w.copies[1].data() + 63, 2 * sizeof(int)));
  EXPECT_FALSE(map.owns(w.copies[0].data())) << "another rank's copy is not this rank's allocation";
  const auto view = map.peer_view();
  EXPECT_EQ(view.rank, 1);
  EXPECT_EQ(view.world_size, 3);
}

TEST(AddressMap, RefusesBrokenTables) {
  ThreeRanks w;
  EXPECT_NE(error_of([&] { SymmetricAddressMap::from_table("test", 3, w.table(), 4); }).find("outside the table"),
            std::string::npos);
  auto table = w.table();
  table[0] = 0;
  EXPECT_NE(error_of([&] { SymmetricAddressMap::from_table("test", 0, table, 4); }).find("entry for the local rank"),
            std::string::npos);
  EXPECT_THROW(SymmetricAddressMap::from_table("test", 0, {}, 4), aperture::Error);
}

TEST(AddressMap, ViewTablesShiftEveryDirectEntry) {
  ThreeRanks w;
  auto table = w.table();
  table[2] = 0;  // rank 2 not directly addressable
  const auto map = SymmetricAddressMap::from_table("test", 0, table, 64 * sizeof(int));
  const auto shifted = map.view_table(w.copies[0].data() + 10, 5 * sizeof(int));
  EXPECT_EQ(shifted[0], reinterpret_cast<std::int64_t>(w.copies[0].data() + 10));
  EXPECT_EQ(shifted[1], reinterpret_cast<std::int64_t>(w.copies[1].data() + 10));
  EXPECT_EQ(shifted[2], 0) << "a non-direct peer stays 0";
  EXPECT_THROW(map.view_table(w.copies[0].data() + 60, 5 * sizeof(int)), aperture::Error);
  EXPECT_THROW(map.view_table(w.copies[1].data(), 4), aperture::Error);
}

TEST(AddressMap, CheckedTranslateRefusesNonDirectPeersBadRanksAndForeignPointers) {
  ThreeRanks w;
  auto table = w.table();
  table[2] = 0;
  const auto map = SymmetricAddressMap::from_table("test", 0, table, 64 * sizeof(int));
  EXPECT_FALSE(map.is_direct(2));
  EXPECT_FALSE(map.all_direct());
  EXPECT_EQ(map.indirect_peers(), std::vector<int>{2});
  EXPECT_EQ(aperture::checked_translate(map, w.copies[0].data() + 7, 1), w.copies[1].data() + 7);
  EXPECT_NE(error_of([&] { aperture::checked_translate(map, w.copies[0].data(), 2); }).find("not directly addressable"),
            std::string::npos);
  EXPECT_NE(error_of([&] { aperture::checked_translate(map, w.copies[0].data(), 3); }).find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of([&] { aperture::checked_translate(map, w.copies[0].data(), -1); }).find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of([&] { aperture::checked_translate(map, w.copies[0].data() + 60, 1, 8); }).find("not inside"),
            std::string::npos);
  int elsewhere = 0;
  EXPECT_THROW(aperture::checked_translate(map, &elsewhere, 1), aperture::Error);
  EXPECT_THROW(aperture::checked_translate(SymmetricAddressMap{}, &elsewhere, 0), aperture::Error);
}

TEST(AddressMap, CopiesShareTheTable) {
  ThreeRanks w;
  const auto map = SymmetricAddressMap::from_table("test", 2, w.table(), 4);
  const auto copy = map;
  EXPECT_EQ(copy.peer_bases(), map.peer_bases());
}

}  // namespace
