#include "providers/live_allocations.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../common/error_of.h"
#include "aperture/aperture.h"

namespace {

using aperture::Allocation;
using aperture::detail::LiveAllocations;

Allocation allocation_in(std::vector<char>& memory, std::size_t offset, std::size_t bytes) {
  Allocation a;
  a.ptr = memory.data() + offset;
  a.bytes = bytes;
  a.map = aperture::SymmetricAddressMap::from_table("test", 0, {reinterpret_cast<std::int64_t>(a.ptr)}, bytes);
  return a;
}

using test::error_of;

TEST(LiveAllocations, FreeTakesTheAllocationAndMarksEveryCopyFreed) {
  aperture::Team team = aperture::Team::single();
  std::vector<char> memory(1024);
  LiveAllocations<int> live;
  Allocation a = allocation_in(memory, 0, 100);
  live.add(a, 7);
  const Allocation copy = a;
  EXPECT_EQ(live.take_for_free(team, "test", a).resource, 7);
  EXPECT_EQ(a.ptr, nullptr);
  EXPECT_TRUE(copy.map.freed());
  EXPECT_EQ(live.size(), 0u);
  // The same address, allocated again: a stale copy of the first allocation is still refused.
  Allocation again = allocation_in(memory, 0, 100);
  live.add(again, 8);
  Allocation stale = copy;
  const std::string twice = error_of([&] { live.take_for_free(team, "test", stale); });
  EXPECT_NE(twice.find("already freed"), std::string::npos) << twice;
  EXPECT_NE(twice.find("freed twice"), std::string::npos) << twice;
  EXPECT_EQ(live.size(), 1u) << "nothing freed";
  Allocation stranger = allocation_in(memory, 512, 8);
  const std::string foreign = error_of([&] { live.take_for_free(team, "test", stranger); });
  EXPECT_NE(foreign.find("not a live allocation of this provider"), std::string::npos) << foreign;
}

TEST(LiveAllocations, RangesInsideOverlappingAndOutside) {
  std::vector<char> memory(1024);
  LiveAllocations<int> live;
  live.add(allocation_in(memory, 0, 100), 1);
  live.add(allocation_in(memory, 256, 100), 2);
  const auto* inside = live.containing("test", memory.data() + 260, 50);
  ASSERT_NE(inside, nullptr);
  EXPECT_EQ(inside->allocation_base, reinterpret_cast<std::uintptr_t>(memory.data() + 256));
  EXPECT_EQ(live.containing("test", memory.data() + 128, 64), nullptr);
  for (std::size_t start : {std::size_t{50}, std::size_t{200}}) {  // past the end of one / into the next
    const std::string message = error_of([&] { live.containing("test", memory.data() + start, 100); });
    EXPECT_NE(message.find("overlaps this provider's allocation"), std::string::npos) << message;
  }
  const auto oldest = live.oldest_first();
  ASSERT_EQ(oldest.size(), 2u);
  EXPECT_EQ(oldest[0]->resource, 1);
}

}  // namespace
