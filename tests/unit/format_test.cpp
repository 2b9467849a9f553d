// The error messages' formatter (src/common/format.h): its placeholders, and that an unqualified
// call with an argument from a namespace that has its own format (as std has std::format under
// g++ 13's C++20, found by argument-dependent lookup) still resolves to aperture's. That case
// broke the GPU machine's build once; this file stops compiling if it comes back.
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>

#include "common/format.h"

namespace lookalike {

// A stand-in for std's: a format string type built by a consteval constructor, and a format
// template taking forwarding references, as <format> declares them.
template <class... Args>
struct format_string {
  template <class T>
    requires std::is_convertible_v<const T&, std::string_view>
  consteval format_string(const T&) {}  // NOLINT(google-explicit-constructor): as std's
};
template <class... Args>
std::string format(format_string<std::type_identity_t<Args>...>, Args&&...) {
  return "lookalike::format";
}

struct Name {
  std::string text;
};
inline std::ostream& operator<<(std::ostream& out, const Name& name) { return out << name.text; }

}  // namespace lookalike

namespace aperture::detail {
namespace {

TEST(Format, FillsPlaceholdersInOrder) {
  EXPECT_EQ(format("rank {} of {}", 1, 4), "rank 1 of 4");
  EXPECT_EQ(format("{}{}", "a", std::string("b")), "ab");
  EXPECT_EQ(format("no placeholder"), "no placeholder");
}

TEST(Format, HexWithPrefix) {
  EXPECT_EQ(format("entry {:#x}", std::uint64_t{0xbeef}), "entry 0xbeef");
  EXPECT_EQ(format("{:#x} then {}", 255, 255), "0xff then 255");
}

TEST(Format, MissingOrExtraArgumentsNeverLoseTheMessage) {
  EXPECT_EQ(format("{} and {}", 1), "1 and {?}");
  EXPECT_EQ(format("only {}", 1, 2), "only 1");
}

TEST(Format, ANonLiteralFormatString) {
  const std::string text = "{} bytes";
  EXPECT_EQ(format(std::string_view(text), 8), "8 bytes");
}

TEST(Format, UnqualifiedCallsStayOursBesideAnotherFormat) {
  const lookalike::Name constant{"nccl"};
  lookalike::Name mutable_name{"nvshmem"};
  EXPECT_EQ(format(" (over {} communicator)", constant), " (over nccl communicator)");
  EXPECT_EQ(format("{} of {}", mutable_name, 2), "nvshmem of 2");
  EXPECT_EQ(format("{}", lookalike::Name{"temporary"}), "temporary");
}

}  // namespace
}  // namespace aperture::detail
