#include "providers/provider_common.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "aperture/error.h"
#include "detail/format.h"

namespace aperture::detail {

void agree_or_throw(Team& team, std::string_view who, std::string_view step, const std::string& local_error,
                    ErrorCode code) {
  const std::uint64_t failed = local_error.empty() ? 0 : 1;
  std::vector<std::uint64_t> all(team.size());
  team.allgather(&failed, all.data(), sizeof failed);
  if (!local_error.empty())
    throw Error(code, detail::format("{} (rank {}) {}: {}", who, team.rank(), step, local_error));
  for (int r = 0; r < team.size(); ++r)
    if (all[r] != 0)
      throw Error(ErrorCode::peer_lost, detail::format("{}: rank {} failed {}; see its error", who, r, step));
}

void agree_or_refuse(Team& team, std::string_view who, std::string_view step, const std::string& local_error,
                     ErrorCode code) {
  // A refusal explains itself in a few lines; a longer one is cut rather than sent whole.
  constexpr std::size_t kLongest = 4096;
  struct Verdict {
    std::uint64_t length;  // 0: this rank succeeded
    std::int64_t code;
  };
  const std::string text = local_error.substr(0, kLongest);
  const Verdict mine{text.size(), static_cast<std::int64_t>(code)};
  std::vector<Verdict> all(team.size());
  team.allgather(&mine, all.data(), sizeof mine);
  std::uint64_t longest = 0;
  int first = -1;
  for (int r = 0; r < team.size(); ++r) {
    longest = std::max(longest, all[r].length);
    if (first < 0 && all[r].length != 0) first = r;
  }
  if (first < 0) return;
  std::vector<char> padded(longest, '\0');
  std::memcpy(padded.data(), text.data(), text.size());
  std::vector<char> texts(longest * static_cast<std::size_t>(team.size()));
  team.allgather(padded.data(), texts.data(), longest);
  const std::string reason(texts.data() + longest * static_cast<std::size_t>(first), all[first].length);
  std::string others;
  for (int r = first + 1; r < team.size(); ++r)
    if (all[r].length != 0) others += detail::format("{}{}", others.empty() ? "" : ", ", r);
  throw Error(static_cast<ErrorCode>(all[first].code),
              detail::format("{} {}: refused on every rank: rank {}{}: {}", who, step, first,
                             others.empty() ? "" : detail::format(" (and ranks {})", others), reason));
}

}  // namespace aperture::detail
