// src/providers/foreign_window/nccl_peer_table.h — the part of the nccl provider that needs NCCL's device API.
//
// NCCL 2.28 says where a peer's copy of a symmetric window is mapped only on the device
// (ncclGetPeerPointer, nccl_device/core.h), so the table is filled by a one-block kernel. Only
// nccl_peer_table.cu includes the device API headers; the provider itself (nccl.cpp) is plain
// C++ and sees this small interface.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <string>

namespace aperture::detail::nccl_device {

// Owns an ncclDevComm: the device-side view of a communicator, made once per provider.
class DeviceComm {
 public:
  // Collective over the communicator (ncclDevCommCreate). Returns "" and sets `out`, or the failure.
  static std::string create(ncclComm_t comm, std::unique_ptr<DeviceComm>& out);
  // ncclDevCommDestroy, unless forget() was called (the communicator was aborted).
  ~DeviceComm();
  DeviceComm(const DeviceComm&) = delete;
  DeviceComm& operator=(const DeviceComm&) = delete;

  void forget() { comm_ = nullptr; }
  int world_rank() const;  // this rank in the communicator (which may hold one node's ranks only)
  int world_size() const;  // the communicator's ranks
  int lsa_rank() const;  // this rank's place in its load/store-accessible (LSA) team
  int lsa_size() const;  // how many ranks can reach each other's windows by load/store

  // Fills device_table[0 .. team_size] on `stream` and waits for it. The communicator may hold
  // only some of the team's ranks (those of one node): its rank p is team rank
  // team_rank_of[p] (a device array of world_size() entries). The entry of team rank r is where
  // r's copy of `window` (offset 0) is mapped here, 0 for a rank outside the LSA team or outside
  // the communicator, and `local_base` for this rank (the address the caller allocated, which
  // the table must hold). Entry team_size is NCCL's own mapping of this rank's copy
  // (ncclGetLocalPointer), for checks.
  std::string fill_peer_table(ncclWindow_t window, const void* local_base, const int* team_rank_of, int team_size,
                              std::int64_t* device_table, cudaStream_t stream) const;

 private:
  struct Impl;
  DeviceComm(ncclComm_t comm, std::unique_ptr<Impl> impl);
  ncclComm_t comm_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aperture::detail::nccl_device
