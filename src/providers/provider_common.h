// src/providers/provider_common.h — what every provider's set-up needs.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "aperture/error.h"
#include "aperture/team.h"

namespace aperture::detail {

// Collective. Every rank learns whether any rank failed `step` (its `local_error` is not empty),
// so all of them throw together instead of some waiting forever in the next collective call.
// The failing rank's error carries its message and `code` (what kind of failure it was); the
// others' errors name the lowest rank that failed and carry its message, with code peer_lost.
// One allgather when nobody failed, two when someone did.
void agree_or_throw(Team& team, std::string_view who, std::string_view step, const std::string& local_error,
                    ErrorCode code = ErrorCode::system);

// Collective. Like agree_or_throw, for refusals every rank must read alike (memory that cannot be
// had): when any rank failed, every rank throws the code and message of the lowest rank that
// failed, so the others do not see a bare "rank R failed" but what was asked, what is available
// and what to raise. One allgather when nobody failed, two when someone did.
void agree_or_refuse(Team& team, std::string_view who, std::string_view step, const std::string& local_error,
                     ErrorCode code);

// The node of every rank, in rank order (Team::node_of for 0..size()-1): what the providers' pure
// placement logic takes, so that it can be tested without a Team.
inline std::vector<int> node_of_each_rank(const Team& team) {
  std::vector<int> node_of_rank(static_cast<std::size_t>(team.size()));
  for (int r = 0; r < team.size(); ++r) node_of_rank[static_cast<std::size_t>(r)] = team.node_of(r);
  return node_of_rank;
}

}  // namespace aperture::detail
