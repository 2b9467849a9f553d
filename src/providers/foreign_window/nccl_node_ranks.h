// src/providers/foreign_window/nccl_node_ranks.h — which team ranks the nccl provider's
// communicator holds, and where each of them sits in it.
//
// The provider's NCCL communicator holds the ranks of one node only (all of the team when it is
// one node): NCCL 2.28's device communicator over ranks on several hosts wants GPU-initiated
// networking, and ranks of other nodes are reached through the message engine anyway. The Team
// numbers nodes but does not make a node's ranks consecutive (mpirun may deal ranks out round
// robin), so the communicator's rank i is the i-th lowest team rank of the node, and its lowest
// rank makes the communicator's unique id. Pure, so it is unit-tested without NCCL.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "aperture/error.h"
#include "aperture/team.h"
#include "common/format.h"
#include "providers/provider_common.h"

namespace aperture::detail {

struct NodeCommunicatorRanks {
  std::vector<int> team_rank_of;  // [communicator rank] -> team rank, ascending
  int rank = 0;                   // this rank's communicator rank

  int size() const { return static_cast<int>(team_rank_of.size()); }
  int id_maker() const { return team_rank_of.front(); }  // the team rank that makes the unique id
};

// `node_of_rank[r]` is team rank r's node; `me` is this rank.
inline NodeCommunicatorRanks node_communicator_ranks(std::span<const int> node_of_rank, int me) {
  if (me < 0 || static_cast<std::size_t>(me) >= node_of_rank.size())
    throw Error(ErrorCode::invalid_argument,
                format("nccl: rank {} is outside a team of {} ranks", me, node_of_rank.size()));
  NodeCommunicatorRanks ranks;
  const int node = node_of_rank[static_cast<std::size_t>(me)];
  for (std::size_t r = 0; r < node_of_rank.size(); ++r) {
    if (node_of_rank[r] != node) continue;
    if (static_cast<int>(r) == me) ranks.rank = ranks.size();
    ranks.team_rank_of.push_back(static_cast<int>(r));
  }
  return ranks;
}

inline NodeCommunicatorRanks node_communicator_ranks(const Team& team) {
  NodeCommunicatorRanks ranks = node_communicator_ranks(node_of_each_rank(team), team.rank());
  // The Team counts the same ranks (local_rank and local_size); a difference is a bug here.
  if (ranks.rank != team.local_rank() || ranks.size() != team.local_size())
    throw Error(ErrorCode::internal,
                format("nccl: the node's communicator would put rank {} at {} of {}, the team says local rank {} of {}",
                       team.rank(), ranks.rank, ranks.size(), team.local_rank(), team.local_size()));
  return ranks;
}

}  // namespace aperture::detail
