#include "providers/foreign_heap/linear_heap_layout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "aperture/error.h"

namespace {

using aperture::detail::LinearHeapLayout;

// A pretend library over 3 ranks seen from rank 0: rank 1's heap is mapped kStride bytes after
// ours, rank 2 is not reachable. `g_second` is allocation B; how the query treats it is set per test.
constexpr std::uintptr_t kStride = std::uintptr_t{1} << 30;
enum class Mode { linear, b_elsewhere, own_pe_wrong, b_reaches_rank_2, end_in_another_piece };
Mode g_mode = Mode::linear;
const char* g_second = nullptr;

void* query(const void* ptr, int pe) {
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  const bool in_b = g_second != nullptr && address >= reinterpret_cast<std::uintptr_t>(g_second) &&
                    address < reinterpret_cast<std::uintptr_t>(g_second) + 64;
  if (pe == 0) return g_mode == Mode::own_pe_wrong ? reinterpret_cast<void*>(address + 8) : const_cast<void*>(ptr);
  if (pe == 2) return g_mode == Mode::b_reaches_rank_2 && in_b ? reinterpret_cast<void*>(address + 2 * kStride) : nullptr;
  if (in_b && g_mode == Mode::b_elsewhere) return reinterpret_cast<void*>(address + kStride + 4096);
  if (in_b && g_mode == Mode::end_in_another_piece && address != reinterpret_cast<std::uintptr_t>(g_second))
    return reinterpret_cast<void*>(address + 2 * kStride);
  return reinterpret_cast<void*>(address + kStride);
}

struct Learnt {
  std::string error;
  std::vector<std::int64_t> table_b;
};

Learnt learn(LinearHeapLayout& layout, Mode mode, const char* a, const char* b) {
  g_mode = mode;
  g_second = b;
  Learnt learnt;
  learnt.error = layout.learn(0, 3, a, b, learnt.table_b);
  return learnt;
}

TEST(LinearHeapLayout, ALinearHeapGivesEveryAllocationTheSameDistances) {
  std::vector<char> heap(256);
  LinearHeapLayout layout("test", "test_ptr", query);
  const Learnt learnt = learn(layout, Mode::linear, heap.data(), heap.data() + 128);
  EXPECT_EQ(learnt.error, "");
  const auto b = reinterpret_cast<std::int64_t>(heap.data() + 128);
  EXPECT_EQ(learnt.table_b, (std::vector<std::int64_t>{b, b + static_cast<std::int64_t>(kStride), 0}));
  EXPECT_EQ(layout.table_of(heap.data() + 128), learnt.table_b);
  EXPECT_EQ(layout.table_of_foreign_range(heap.data() + 128, 64), learnt.table_b);
}

TEST(LinearHeapLayout, AHeapThatIsNotLinearIsNamed) {
  std::vector<char> heap(256);
  LinearHeapLayout layout("test", "test_ptr", query);
  const Learnt elsewhere = learn(layout, Mode::b_elsewhere, heap.data(), heap.data() + 128);
  EXPECT_NE(elsewhere.error.find("not linear"), std::string::npos) << elsewhere.error;
  EXPECT_NE(elsewhere.error.find("rank 1's copy of a second allocation"), std::string::npos) << elsewhere.error;
  EXPECT_EQ(elsewhere.table_b[1], 0) << "never store through a pointer the query does not vouch for";
  const Learnt reaches = learn(layout, Mode::b_reaches_rank_2, heap.data(), heap.data() + 128);
  EXPECT_NE(reaches.error.find("test_ptr reaches rank 2 for one allocation"), std::string::npos) << reaches.error;
  const Learnt own = learn(layout, Mode::own_pe_wrong, heap.data(), heap.data() + 128);
  EXPECT_NE(own.error.find("test_ptr(ptr, own PE 0)"), std::string::npos) << own.error;
}

TEST(LinearHeapLayout, AForeignRangeInTwoPiecesIsRefused) {
  std::vector<char> heap(256);
  LinearHeapLayout layout("test", "test_ptr", query);
  ASSERT_EQ(learn(layout, Mode::linear, heap.data(), heap.data() + 128).error, "");
  g_mode = Mode::end_in_another_piece;
  try {
    layout.table_of_foreign_range(heap.data() + 128, 64);
    ADD_FAILURE() << "no error";
  } catch (const aperture::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not mapped in one piece for rank 1"), std::string::npos) << e.what();
  }
}

}  // namespace
