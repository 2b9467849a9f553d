#include "providers/own_heap/symmetric_heap.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <vector>

namespace {

using aperture::detail::SymmetricHeap;

TEST(SymmetricHeap, AlignsAndNeverOverlaps) {
  SymmetricHeap heap(1 << 20);
  std::map<std::size_t, std::size_t> live;  // offset -> rounded size
  for (std::size_t alignment : {1u, 64u, 256u, 4096u, 65536u}) {
    const auto offset = heap.allocate(100, alignment);
    ASSERT_TRUE(offset);
    EXPECT_EQ(*offset % alignment, 0u);
    live[*offset] = 128;
  }
  std::size_t end = 0;
  for (auto [offset, size] : live) {
    EXPECT_GE(offset, end);
    end = offset + size;
  }
}

TEST(SymmetricHeap, ZeroBytesStillGetsAnAddressOfItsOwn) {
  SymmetricHeap heap(4096);
  const auto a = heap.allocate(0, 64), b = heap.allocate(0, 64);
  ASSERT_TRUE(a && b);
  EXPECT_NE(*a, *b);
}

TEST(SymmetricHeap, FullHeapSaysNoAndFreeingMakesRoom) {
  SymmetricHeap heap(64 * 16);
  std::vector<std::size_t> offsets;
  for (int i = 0; i < 16; ++i) offsets.push_back(*heap.allocate(64, 64));
  EXPECT_FALSE(heap.allocate(1, 64));
  EXPECT_FALSE(heap.allocate(std::size_t{1} << 40, 64));
  EXPECT_EQ(heap.describe_no_room(1, 64),
            "no free block of 1 bytes (alignment 64): 1024 of 1024 bytes in use in 16 allocations, largest free "
            "block 0 bytes");
  // Free every other block: 8 holes of 64 bytes, none of 128.
  for (int i = 0; i < 16; i += 2) EXPECT_TRUE(heap.free(offsets[i]));
  EXPECT_FALSE(heap.allocate(128, 64));
  EXPECT_TRUE(heap.free(offsets[1]));  // joins holes 0, 1 and 2 into 192 bytes
  const auto merged = heap.allocate(192, 64);
  ASSERT_TRUE(merged);
  EXPECT_EQ(*merged, offsets[0]);
}

TEST(SymmetricHeap, DoubleFreeAndUnknownOffsetsAreRefused) {
  SymmetricHeap heap(4096);
  const auto a = *heap.allocate(10, 64);
  EXPECT_FALSE(heap.free(a + 64));
  EXPECT_TRUE(heap.free(a));
  EXPECT_FALSE(heap.free(a));
}

TEST(SymmetricHeap, FindLocatesTheBlockOfAnInteriorRange) {
  SymmetricHeap heap(4096);
  const auto a = *heap.allocate(100, 64);
  const auto found = heap.find(a + 10, 90);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->first, a);
  EXPECT_EQ(found->second, 100u);
  EXPECT_FALSE(heap.find(a + 10, 91)) << "a range running past the allocation is not owned";
  heap.free(a);
  EXPECT_FALSE(heap.find(a, 1)) << "freed memory is not owned";
}

// Thousands of random allocations and frees, with contents: every live block is filled with its
// own pattern and checked before it is freed, so an overlap shows as a corrupted pattern.
TEST(SymmetricHeap, ChurnKeepsContentsAndReusesSpace) {
  constexpr std::size_t kCapacity = 8 << 20;
  SymmetricHeap heap(kCapacity);
  std::vector<unsigned char> memory(kCapacity);
  std::mt19937_64 random(12345);
  struct Live {
    std::size_t offset, bytes;
    unsigned char pattern;
  };
  std::vector<Live> live;
  std::size_t failures = 0, high_water = 0;
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || random() % 100 < 55) {
      const std::size_t bytes = random() % 3 == 0 ? random() % 200000 : random() % 2000;
      const std::size_t alignment = std::size_t{1} << (random() % 13);
      const auto offset = heap.allocate(bytes, alignment);
      if (!offset) {
        ++failures;
        continue;
      }
      ASSERT_EQ(*offset % alignment, 0u);
      ASSERT_LE(*offset + bytes, kCapacity);
      const auto pattern = static_cast<unsigned char>(random());
      std::memset(memory.data() + *offset, pattern, bytes);
      live.push_back({*offset, bytes, pattern});
      high_water = std::max(high_water, *offset + bytes);
    } else {
      const std::size_t pick = random() % live.size();
      const Live block = live[pick];
      for (std::size_t i = 0; i < block.bytes; ++i)
        ASSERT_EQ(memory[block.offset + i], block.pattern) << "block at " << block.offset << " was overwritten";
      ASSERT_TRUE(heap.free(block.offset));
      live[pick] = live.back();
      live.pop_back();
    }
  }
  for (const Live& block : live) ASSERT_TRUE(heap.free(block.offset));
  EXPECT_EQ(heap.bytes_in_use(), 0u);
  EXPECT_EQ(heap.largest_free_block(), kCapacity) << "freeing everything must coalesce back into one block";
  EXPECT_LT(failures, 2000u);
  EXPECT_LE(high_water, kCapacity);
}

}  // namespace
