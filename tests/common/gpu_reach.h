// tests/common/gpu_reach.h — which peers' GPU memory this rank should reach by load and store,
// judged from the hardware alone (host name, the GPUs' PCI bus ids, cudaDeviceCanAccessPeer),
// never from a provider. The GPU tests compare every provider's is_direct() with it, so that a
// table of zeros (or one claiming a peer the hardware cannot reach) fails them instead of
// shrinking what they check.
#pragma once

#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "reach_mismatch.h"

namespace test {

// Where this rank's memory lives: the host and the PCI bus id of its current GPU.
struct GpuPlace {
  char host[64] = {};
  char bus[32] = {};
};

inline GpuPlace this_gpu_place() {
  GpuPlace place;
  ::gethostname(place.host, sizeof place.host - 1);
  int device = -1;
  if (cudaGetDevice(&device) == cudaSuccess) cudaDeviceGetPCIBusId(place.bus, sizeof place.bus - 1, device);
  (void)cudaGetLastError();
  return place;
}

// Whether this process, on its current GPU, can load and store memory of the GPU at `peer`:
// the same host, and the same GPU or one with peer access. A GPU this process cannot see counts
// as unreachable.
inline bool gpu_reaches(const GpuPlace& me, const GpuPlace& peer) {
  if (std::strncmp(me.host, peer.host, sizeof me.host) != 0) return false;
  if (std::strncmp(me.bus, peer.bus, sizeof me.bus) == 0) return me.bus[0] != '\0';
  int mine = -1, theirs = -1, can = 0;
  const bool known = cudaGetDevice(&mine) == cudaSuccess && cudaDeviceGetByPCIBusId(&theirs, peer.bus) == cudaSuccess &&
                     cudaDeviceCanAccessPeer(&can, mine, theirs) == cudaSuccess;
  (void)cudaGetLastError();
  return known && can != 0;
}

// For every rank of `team`, 1 when this rank should reach its GPU memory directly (collective:
// every rank calls it, in the same order as its other Team calls).
template <class Team>
std::vector<std::uint8_t> expected_gpu_reach(Team& team) {
  const GpuPlace me = this_gpu_place();
  std::vector<GpuPlace> all(static_cast<std::size_t>(team.size()));
  team.allgather(&me, all.data(), sizeof me);
  std::vector<std::uint8_t> reach(all.size());
  for (std::size_t p = 0; p < all.size(); ++p) reach[p] = gpu_reaches(me, all[p]) ? 1 : 0;
  return reach;
}

}  // namespace test
