#include "providers/provider_common.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "aperture/error.h"
#include "detail/format.h"

namespace aperture::detail {

std::size_t size_from_env(const char* variable, std::size_t fallback) {
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  std::size_t scale = 1;
  if (end != text && *end != '\0' && end[1] == '\0') {
    switch (*end) {
      case 'K': case 'k': scale = std::size_t{1} << 10; ++end; break;
      case 'M': case 'm': scale = std::size_t{1} << 20; ++end; break;
      case 'G': case 'g': scale = std::size_t{1} << 30; ++end; break;
      case 'T': case 't': scale = std::size_t{1} << 40; ++end; break;
      default: break;
    }
  }
  if (end == text || *end != '\0' || errno == ERANGE || *text == '-' || value == 0 ||
      value > (std::size_t{1} << 44) / scale)
    throw Error(detail::format("{}='{}' is not a size; give bytes with an optional K, M, G or T suffix (e.g. 4G), at "
                               "least 1 and at most 16T",
                               variable, text));
  return static_cast<std::size_t>(value) * scale;
}

void agree_or_throw(Team& team, std::string_view who, std::string_view step, const std::string& local_error) {
  const std::uint64_t failed = local_error.empty() ? 0 : 1;
  std::vector<std::uint64_t> all(team.size());
  team.allgather(&failed, all.data(), sizeof failed);
  if (!local_error.empty())
    throw Error(detail::format("{} (rank {}) {}: {}", who, team.rank(), step, local_error));
  for (int r = 0; r < team.size(); ++r)
    if (all[r] != 0) throw Error(detail::format("{}: rank {} failed {}; see its error", who, r, step));
}

}  // namespace aperture::detail
