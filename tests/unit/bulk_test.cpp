// tests/unit/bulk_test.cpp — aperture/bulk.h without a GPU: the host-memory path (a memcpy on the
// host table's translation) with values distinct per rank and element, every byte checked, and
// every refusal (bad rank, indirect peer with and without an engine channel, ranges outside the
// allocation, a stream on host memory, freed and empty maps, a wrapping count). Three "ranks" in
// one process, each copy its own array, as in address_map_test.cpp. The GPU side:
// tests/gpu/gpu_bulk_test.cu.
#include <gtest/gtest.h>

#include <aperture/bulk.h>
#include <aperture/error.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../common/error_of.h"

namespace {

using aperture::BulkOptions;
using aperture::BulkPath;
using aperture::ErrorCode;
using aperture::SymmetricAddressMap;
using test::code_of;
using test::error_of;

constexpr std::size_t kBytes = 4096 + 13;  // odd, so no transfer is a whole number of words

struct ThreeRanks {
  std::array<std::vector<unsigned char>, 3> copies;
  ThreeRanks() {
    for (int r = 0; r < 3; ++r) {
      copies[r].resize(kBytes);
      for (std::size_t i = 0; i < kBytes; ++i) copies[r][i] = value(r, i);
    }
  }
  static unsigned char value(int rank, std::size_t i) { return static_cast<unsigned char>(rank * 71 + i * 7 + i / 251); }
  std::vector<std::int64_t> table() const {
    std::vector<std::int64_t> t;
    for (const auto& c : copies) t.push_back(reinterpret_cast<std::int64_t>(c.data()));
    return t;
  }
  SymmetricAddressMap map(int me) const { return SymmetricAddressMap::from_table("test", me, table(), kBytes); }
};

// Every byte of `got` against rank `rank`'s pattern shifted by `from`, over [begin, end); the
// rest against `untouched`'s own pattern.
void expect_moved(const std::vector<unsigned char>& got, int untouched, int rank, std::size_t begin, std::size_t end,
                  std::size_t from) {
  for (std::size_t i = 0; i < kBytes; ++i) {
    const unsigned char want =
        i >= begin && i < end ? ThreeRanks::value(rank, from + (i - begin)) : ThreeRanks::value(untouched, i);
    ASSERT_EQ(got[i], want) << "byte " << i;
  }
}

TEST(Bulk, PutGetAndCopyOnHostMemoryMoveEveryByteToTheRightRankAndOffset) {
  for (std::size_t offset : {std::size_t{0}, std::size_t{1}, std::size_t{7}}) {
    for (std::size_t bytes : {std::size_t{1}, std::size_t{3}, std::size_t{255}, kBytes - 7}) {
      SCOPED_TRACE("offset " + std::to_string(offset) + ", " + std::to_string(bytes) + " bytes");
      ThreeRanks w;
      const SymmetricAddressMap map = w.map(0);  // rank 0's view: its pointers are into copies[0]
      unsigned char* mine = w.copies[0].data();
      std::vector<unsigned char> local(kBytes);
      for (std::size_t i = 0; i < kBytes; ++i) local[i] = ThreeRanks::value(5, i);
      // put: local[3 ..] -> rank 2's copy at offset
      aperture::bulk_put(mine + offset, local.data() + 3, bytes, 2, map);
      expect_moved(w.copies[2], 2, 5, offset, offset + bytes, 3);
      // get: rank 1's copy at offset + 2 -> local at offset (as much as fits before the end)
      const std::size_t got = std::min(bytes, kBytes - offset - 2);
      aperture::bulk_get(local.data() + offset, mine + offset + 2, got, 1, map);
      expect_moved(local, 5, 1, offset, offset + got, offset + 2);
      // copy: rank 1's [0, bytes) -> rank 0's [offset, offset + bytes), given from rank 2's map
      const SymmetricAddressMap map2 = w.map(2);
      unsigned char* theirs = w.copies[2].data();
      aperture::bulk_copy(theirs + offset, theirs, bytes, /*src_rank=*/1, /*dst_rank=*/0, map2);
      expect_moved(w.copies[0], 0, 1, offset, offset + bytes, 0);
    }
  }
}

TEST(Bulk, ElementFormsCountElementsAndEveryPathServesHostMemory) {
  std::array<std::vector<std::int64_t>, 2> copies{std::vector<std::int64_t>(100), std::vector<std::int64_t>(100)};
  const std::vector<std::int64_t> table{reinterpret_cast<std::int64_t>(copies[0].data()),
                                        reinterpret_cast<std::int64_t>(copies[1].data())};
  const auto map = SymmetricAddressMap::from_table("test", 0, table, 100 * sizeof(std::int64_t));
  std::vector<std::int64_t> src(100);
  for (BulkPath path : {BulkPath::automatic, BulkPath::copy_engine, BulkPath::sm_copy}) {
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = 1000 * (static_cast<int>(path) + 1) + static_cast<std::int64_t>(i);
    aperture::bulk_put(copies[0].data() + 10, src.data(), 90, 1, map, nullptr, BulkOptions{path});
    for (std::size_t i = 0; i < 100; ++i) ASSERT_EQ(copies[1][i], i < 10 ? 0 : src[i - 10]) << "element " << i;
  }
}

TEST(Bulk, PathChoiceFollowsTheCrossoverAndTheForcedPaths) {
  const std::size_t at = aperture::detail::kBulkCopyEngineMinBytes;
  EXPECT_EQ(aperture::bulk_path_for(at - 1), BulkPath::sm_copy);
  EXPECT_EQ(aperture::bulk_path_for(at), BulkPath::copy_engine);
  EXPECT_EQ(aperture::bulk_path_for(1, BulkOptions{BulkPath::copy_engine}), BulkPath::copy_engine);
  EXPECT_EQ(aperture::bulk_path_for(std::size_t{1} << 30, BulkOptions{BulkPath::sm_copy}), BulkPath::sm_copy);
  EXPECT_EQ(aperture::bulk_path_for(100, BulkOptions{BulkPath::automatic, 64}), BulkPath::copy_engine);
  // Within the caller's own copy: the copy engine at every size, unless a path is forced.
  EXPECT_EQ(aperture::bulk_path_for(1, BulkOptions{}, /*to_self=*/true), BulkPath::copy_engine);
  EXPECT_EQ(aperture::bulk_path_for(at - 1, BulkOptions{}, /*to_self=*/true), BulkPath::copy_engine);
  EXPECT_EQ(aperture::bulk_path_for(1, BulkOptions{BulkPath::sm_copy}, /*to_self=*/true), BulkPath::sm_copy);
}

TEST(Bulk, ZeroBytesMoveNothingButStillCheckTheRank) {
  ThreeRanks w;
  const auto map = w.map(0);
  aperture::bulk_put_bytes(w.copies[0].data(), nullptr, 0, 1, map);
  expect_moved(w.copies[1], 1, 1, 0, 0, 0);
  EXPECT_EQ(code_of([&] { aperture::bulk_put_bytes(w.copies[0].data(), nullptr, 0, 3, map); }),
            ErrorCode::invalid_argument);
}

TEST(Bulk, RefusesBadRanksIndirectPeersAndRangesOutsideTheAllocation) {
  ThreeRanks w;
  auto table = w.table();
  table[1] = 0;  // rank 1 is not directly addressable
  const auto map = SymmetricAddressMap::from_table("test", 0, table, kBytes);
  unsigned char* mine = w.copies[0].data();
  std::vector<unsigned char> local(kBytes);

  EXPECT_NE(error_of([&] { aperture::bulk_put(mine, local.data(), 8, 3, map); }).find("rank 3 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of([&] { aperture::bulk_get(local.data(), mine, 8, -1, map); }).find("rank -1 is out of range"),
            std::string::npos);
  const std::string indirect = error_of([&] { aperture::bulk_put(mine, local.data(), 8, 1, map); });
  EXPECT_NE(indirect.find("rank 1 is not directly addressable"), std::string::npos) << indirect;
  EXPECT_EQ(code_of([&] { aperture::bulk_copy(mine, mine + 8, 8, 2, 1, map); }), ErrorCode::invalid_argument);

  // Past the end, before the start, and a pointer of another rank's address space.
  const std::string past = error_of([&] { aperture::bulk_put(mine + kBytes - 4, local.data(), 5, 2, map); });
  EXPECT_NE(past.find("bulk_put: dst"), std::string::npos) << past;
  EXPECT_NE(past.find("is not inside this allocation"), std::string::npos) << past;
  EXPECT_NE(error_of([&] { aperture::bulk_get(local.data(), mine - 1, 4, 2, map); }).find("bulk_get: src"),
            std::string::npos);
  EXPECT_NE(error_of([&] { aperture::bulk_copy(mine, w.copies[2].data(), 4, 2, 0, map); }).find("bulk_copy: src"),
            std::string::npos);
  EXPECT_NE(error_of([&] { aperture::bulk_copy(w.copies[2].data(), mine, 4, 2, 0, map); }).find("bulk_copy: dst"),
            std::string::npos);
  // A null local side.
  EXPECT_NE(error_of([&] { aperture::bulk_put_bytes(mine, nullptr, 4, 2, map); }).find("src is null"),
            std::string::npos);
  EXPECT_NE(error_of([&] { aperture::bulk_get_bytes(nullptr, mine, 4, 2, map); }).find("dst is null"),
            std::string::npos);
  // A count whose byte length wraps.
  EXPECT_NE(error_of([&] { aperture::bulk_put(reinterpret_cast<std::int64_t*>(mine), static_cast<const std::int64_t*>(nullptr), SIZE_MAX / 4, 2, map); })
                .find("more than the address space holds"),
            std::string::npos);
  // Nothing moved by any refused call.
  expect_moved(w.copies[2], 2, 2, 0, 0, 0);
}

void no_engine_call(void*, const aperture::EngineRequest&, void*) {}

TEST(Bulk, RefusesIndirectPeersEvenWithAnEngineChannel) {
  ThreeRanks w;
  auto table = w.table();
  table[2] = 0;
  const auto map = SymmetricAddressMap::from_table("test", 0, table, kBytes);
  aperture::EngineChannel channel{};
  channel.host_call = &no_engine_call;
  map.attach_engine(channel, nullptr);
  std::vector<unsigned char> local(16);
  const std::string why = error_of([&] { aperture::bulk_get(local.data(), w.copies[0].data(), 16, 2, map); });
  EXPECT_NE(why.find("bulk transfers to indirect peers are not supported"), std::string::npos) << why;
}

TEST(Bulk, RefusesAStreamOnHostMemoryAndFreedOrEmptyMaps) {
  ThreeRanks w;
  const auto map = w.map(0);
  std::vector<unsigned char> local(16, 9);
  int not_a_stream = 0;
  const std::string streamed =
      error_of([&] { aperture::bulk_put(w.copies[0].data(), local.data(), 16, 1, map, &not_a_stream); });
  EXPECT_NE(streamed.find("pass no stream"), std::string::npos) << streamed;
  expect_moved(w.copies[1], 1, 1, 0, 0, 0);

  EXPECT_NE(error_of([&] { aperture::bulk_put(w.copies[0].data(), local.data(), 16, 1, SymmetricAddressMap{}); })
                .find("the map is empty"),
            std::string::npos);
  map.mark_freed();
  EXPECT_NE(error_of([&] { aperture::bulk_put(w.copies[0].data(), local.data(), 16, 1, map); }).find("use after free"),
            std::string::npos);
  EXPECT_EQ(code_of([&] {
              aperture::bulk_put(w.copies[0].data(), local.data(), 16, 1, map, nullptr, BulkOptions{BulkPath(7)});
            }),
            ErrorCode::invalid_argument);
}

}  // namespace
