// src/providers/cuda/foreign_gpu.h — what the GPU providers over foreign allocators (nvshmem, nccl)
// share: placing a table in device memory, agreeing on failures, and proving
// at start-up that a table's peer entries really are the peers' memory. cuda-vmm and cuda-ipc
// use its device tables too.
//
// Private to src/providers; CUDA errors go through cuda_check.h like every other CUDA call of
// the library.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "aperture/address_map.h"
#include "aperture/error.h"
#include "aperture/team.h"
#include "common/cuda_check.h"
#include "common/format.h"
#include "providers/cuda/current_device.h"
#include "providers/cuda/gpu_selection.h"
#include "providers/provider_common.h"

namespace aperture::detail::foreign_gpu {

using detail::agree_or_throw;  // providers/provider_common.h

// Owns a device table (a cudaMalloc on `device`) and cudaFrees it with the last copy of the map.
// cudaFree waits for the device, so a kernel still reading the table is never left with freed
// memory; errors in the deleter are ignored (at exit the runtime may be gone already, and a
// deleter cannot throw).
inline std::shared_ptr<const void> device_table_owner(int device, void* device_table) {
  return std::shared_ptr<const void>(device_table, [device](const void* p) {
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    if (previous != device) (void)cudaSetDevice(device);
    (void)cudaFree(const_cast<void*>(p));
    if (previous >= 0 && previous != device) (void)cudaSetDevice(previous);
    (void)cudaGetLastError();
  });
}

// A device copy of `table` on `device` for the kernels, freed with the last copy of the map.
inline TablePlacement place_table_on_device(int device, const std::vector<std::int64_t>& table, std::string_view who) {
  CurrentDevice current(device, who);
  const std::size_t bytes = table.size() * sizeof(std::int64_t);
  void* device_table = nullptr;
  check_cuda(cudaMalloc(&device_table, bytes), "cudaMalloc(&device_table, bytes)", __FILE__, __LINE__, who);
  std::shared_ptr<const void> owner = device_table_owner(device, device_table);
  // Synchronous: the table is in place before any stream of the caller's runs.
  check_cuda(cudaMemcpy(device_table, table.data(), bytes, cudaMemcpyHostToDevice),
             "cudaMemcpy(device_table, table, bytes, cudaMemcpyHostToDevice)", __FILE__, __LINE__, who);
  return TablePlacement{static_cast<const std::int64_t*>(device_table), std::move(owner)};
}

// What rank `from` writes into rank `to`'s probe: distinct per (writer, target) pair.
inline std::uint64_t probe_stamp(int from, int to) {
  return 0xA7E0'0000'0000'0000ull | (static_cast<std::uint64_t>(from) << 24) | static_cast<std::uint64_t>(to);
}
inline constexpr std::uint64_t kProbeUntouched = ~std::uint64_t{0};

// Collective. `probe` is this rank's copy of a symmetric allocation of at least
// team.size() * 8 bytes and `table` its peer table (host copy). Every rank stores its stamp into
// slot [me] of every peer's copy through the table, then checks that what arrived in its own
// copy is exactly the stamps of the ranks that reached it. Returns "" or what went wrong; the
// caller agrees on it with agree_or_throw. The stores are device copies into the peer mappings:
// the same path a kernel's stores take, through the address the table gives.
inline std::string verify_peer_stores(Team& team, void* probe, const std::vector<std::int64_t>& table) {
  const int n = team.size();
  const int me = team.rank();
  auto* mine = static_cast<std::uint64_t*>(probe);
  std::string error;
  {
    const std::vector<std::uint64_t> untouched(n, kProbeUntouched);
    error = APERTURE_CUDA_TRY(cudaMemcpy(mine, untouched.data(), n * sizeof(std::uint64_t), cudaMemcpyHostToDevice));
    if (error.empty()) error = APERTURE_CUDA_TRY(cudaDeviceSynchronize());
  }
  std::vector<std::uint64_t> failed_all(n);
  const std::uint64_t failed_init = error.empty() ? 0 : 1;
  team.allgather(&failed_init, failed_all.data(), sizeof failed_init);  // every probe is initialised
  for (int r = 0; r < n; ++r)
    if (failed_all[r] != 0) return error.empty() ? format("rank {} could not initialise its probe", r) : error;

  std::vector<std::uint8_t> stored(n, 0);
  for (int p = 0; p < n && error.empty(); ++p) {
    if (table[p] == 0) continue;
    const std::uint64_t stamp = probe_stamp(me, p);
    auto* target = reinterpret_cast<std::uint64_t*>(table[p]) + me;
    error = APERTURE_CUDA_TRY(cudaMemcpy(target, &stamp, sizeof stamp, cudaMemcpyHostToDevice));
    if (!error.empty()) {
      error = format("storing into rank {}'s copy at {} (its table entry) failed: {}", p, static_cast<void*>(target),
                     error);
      break;
    }
    stored[p] = 1;
  }
  if (error.empty()) error = APERTURE_CUDA_TRY(cudaDeviceSynchronize());
  std::vector<std::uint8_t> stored_by(static_cast<std::size_t>(n) * n);
  team.allgather(stored.data(), stored_by.data(), static_cast<std::size_t>(n));  // every store has landed
  if (!error.empty()) return error;

  std::vector<std::uint64_t> seen(n);
  error = APERTURE_CUDA_TRY(cudaMemcpy(seen.data(), mine, n * sizeof(std::uint64_t), cudaMemcpyDeviceToHost));
  if (!error.empty()) return error;
  for (int q = 0; q < n; ++q) {
    const std::uint64_t expected = stored_by[static_cast<std::size_t>(q) * n + me] ? probe_stamp(q, me) : kProbeUntouched;
    if (seen[q] != expected)
      error += format("\n  slot {} of this rank's probe holds {:#x}, expected {:#x} (rank {} {} it)", q, seen[q],
                      expected, q, stored_by[static_cast<std::size_t>(q) * n + me] ? "stored into" : "did not reach");
  }
  if (!error.empty()) error = "a store through the peer table did not arrive where it should:" + error;
  return error;
}

}  // namespace aperture::detail::foreign_gpu
