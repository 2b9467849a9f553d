// tests/gpu/provider_checks.h — host-side checks every GPU provider must pass, whoever allocated
// the memory (cuda-ipc, cuda-vmm, NVSHMEM, NCCL): which provider it is and which GPU each rank
// took, the table invariant of a fresh allocation, and the provider used with another device
// current.
#pragma once

#include <cuda_runtime.h>

#include <aperture/aperture.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "gpu_test.h"

namespace gputest {

// The provider's name, memory kind and linearity; this rank took GPU local_rank % count.
inline void check_identity(Job& job, const char* name, bool linear) {
  auto& provider = *job.provider;
  CHECK(provider.name() == name);
  CHECK(provider.memory_kind() == aperture::MemoryKind::device);
  CHECK(provider.is_linear() == linear);
  int count = 0, device = -1;
  APERTURE_CUDA_CHECK(cudaGetDeviceCount(&count), "test");
  APERTURE_CUDA_CHECK(cudaGetDevice(&device), "test");
  CHECK_MSG(device == job.team.local_rank() % count,
            "rank " + std::to_string(job.me) + " took GPU " + std::to_string(device) + " of " + std::to_string(count));
}

// The table invariant of a live allocation: its map describes it, the local entry is its own
// address, the memory and the kernels' table are on this rank's GPU, and the device copy of the
// table matches the host's.
inline void check_table(Job& job, const aperture::Allocation& x) {
  const int me = job.me, n = job.n;
  int device = -1;
  APERTURE_CUDA_CHECK(cudaGetDevice(&device), "test");
  CHECK(x.map.local_rank == me);
  CHECK(x.map.world_size == n);
  CHECK(x.map.allocation_base == reinterpret_cast<std::uintptr_t>(x.ptr));
  CHECK(x.map.allocation_bytes == x.bytes);
  CHECK(x.map.host_peer_bases()[me] == static_cast<std::int64_t>(x.map.allocation_base));
  CHECK(x.map.owns(x.ptr, x.bytes));
  CHECK(device_of(x.ptr) == device);               // the memory is on this rank's GPU
  CHECK(device_of(x.map.peer_bases()) == device);  // so is the kernels' table
  const auto on_device = to_host(x.map.peer_bases(), n);
  for (int p = 0; p < n; ++p) CHECK(on_device[p] == x.map.host_peer_bases()[p]);
}

// Prints which peers the fresh allocation `a` (4096 int64) reaches; every peer on this machine
// is direct (P2P: all of them on an NVLink machine), and the memory starts zeroed.
inline void check_peers_and_zeroed(Job& job, const aperture::Allocation& a) {
  const int me = job.me, n = job.n;
  std::string peers;
  for (int p = 0; p < n; ++p) peers += (a.map.is_direct(p) ? " direct" : " NOT-direct");
  std::printf("rank %d: %s peers:%s\n", me, std::string(job.provider->name()).c_str(), peers.c_str());
  for (int p = 0; p < n; ++p)
    if (job.team.same_node(p)) CHECK_MSG(a.map.is_direct(p), "same-node peer " + std::to_string(p) + " not direct");
  const auto fresh = to_host(a.as<std::int64_t>(), 4096);
  bool zero = true;
  for (auto v : fresh) zero = zero && v == 0;
  CHECK_MSG(zero, "fresh memory is zeroed");
}

// With several GPUs, the provider works whichever device the caller made current since (an
// allocation of `bytes` lands on this rank's GPU, table included), and leaves that device current.
inline void check_other_current_device(Job& job, std::size_t bytes) {
  int count = 0, mine = -1;
  APERTURE_CUDA_CHECK(cudaGetDeviceCount(&count), "test");
  APERTURE_CUDA_CHECK(cudaGetDevice(&mine), "test");
  const int other = (mine + 1) % count;
  APERTURE_CUDA_CHECK(cudaSetDevice(other), "test");
  auto a = job.provider->allocate(bytes);
  int now = -1;
  APERTURE_CUDA_CHECK(cudaGetDevice(&now), "test");
  CHECK(now == other);
  CHECK(device_of(a.ptr) == mine);
  CHECK(device_of(a.map.peer_bases()) == mine);
  job.provider->free(a);
  APERTURE_CUDA_CHECK(cudaSetDevice(mine), "test");
}

}  // namespace gputest
