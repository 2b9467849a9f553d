#include "providers/provider_common.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "aperture/error.h"
#include "common/format.h"

namespace aperture::detail {

namespace {

// Who failed, and what the lowest failing rank said.
struct Verdicts {
  int first = -1;      // the lowest rank that failed; -1: none did
  std::string reason;  // its message (cut at kLongest)
  std::string others;  // the other ranks that failed, "2, 5"
  ErrorCode code = ErrorCode::system;
};

// Collective. One allgather when nobody failed; a second one carries the lowest failing rank's
// message to every rank when someone did.
Verdicts gather_verdicts(Team& team, const std::string& local_error, ErrorCode code) {
  // A failure explains itself in a few lines; a longer one is cut rather than sent whole.
  constexpr std::size_t kLongest = 4096;
  struct Verdict {
    std::uint64_t length;  // 0: this rank succeeded
    std::int64_t code;
  };
  const std::string text = local_error.substr(0, kLongest);
  // An empty message still counts as a failure when local_error says one happened.
  const Verdict mine{local_error.empty() ? 0 : std::max<std::uint64_t>(text.size(), 1), static_cast<std::int64_t>(code)};
  std::vector<Verdict> all(team.size());
  team.allgather(&mine, all.data(), sizeof mine);
  Verdicts v;
  std::uint64_t longest = 0;
  for (int r = 0; r < team.size(); ++r) {
    longest = std::max(longest, all[r].length);
    if (v.first < 0 && all[r].length != 0) v.first = r;
  }
  if (v.first < 0) return v;
  std::vector<char> padded(longest, '\0');
  std::memcpy(padded.data(), text.data(), text.size());
  std::vector<char> texts(longest * static_cast<std::size_t>(team.size()));
  team.allgather(padded.data(), texts.data(), longest);
  const char* first_text = texts.data() + longest * static_cast<std::size_t>(v.first);
  v.reason.assign(first_text, ::strnlen(first_text, all[v.first].length));
  for (int r = v.first + 1; r < team.size(); ++r)
    if (all[r].length != 0) v.others += detail::format("{}{}", v.others.empty() ? "" : ", ", r);
  v.code = static_cast<ErrorCode>(all[v.first].code);
  return v;
}

}  // namespace

void agree_or_throw(Team& team, std::string_view who, std::string_view step, const std::string& local_error,
                    ErrorCode code) {
  const Verdicts v = gather_verdicts(team, local_error, code);
  if (v.first < 0) return;
  if (!local_error.empty())
    throw Error(code, detail::format("{} (rank {}) {}: {}", who, team.rank(), step, local_error));
  // Its reason, not only its rank: a failure that names another rank (a peer that died while its
  // memory was being mapped) names it on every rank.
  throw Error(ErrorCode::peer_lost, detail::format("{}: rank {} failed {}: {}", who, v.first, step, v.reason));
}

void agree_or_refuse(Team& team, std::string_view who, std::string_view step, const std::string& local_error,
                     ErrorCode code) {
  const Verdicts v = gather_verdicts(team, local_error, code);
  if (v.first < 0) return;
  throw Error(v.code, detail::format("{} {}: refused on every rank: rank {}{}: {}", who, step, v.first,
                                     v.others.empty() ? "" : detail::format(" (and ranks {})", v.others), v.reason));
}

}  // namespace aperture::detail
