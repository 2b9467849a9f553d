#include "providers/provider_common.h"

#include <cstdint>
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

}  // namespace aperture::detail
