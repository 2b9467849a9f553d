// src/providers/cuda/current_device.h — the GPU providers' device guard.
//
// Makes a provider's device current on this thread for the guard's lifetime and restores the
// caller's device after, so provider calls work whichever device the caller has made current
// since. Private to src/providers.
#pragma once

#include <cuda_runtime_api.h>

#include <string_view>

#include "common/cuda_check.h"

namespace aperture::detail {

enum class SetDevice {
  // Only when another device is current (the runtime API creates the context on first use).
  when_different,
  // Always: on a thread that never used CUDA the runtime reports device 0 without any context
  // being current, and driver API calls (cuda-vmm) need one.
  always,
};

class CurrentDevice {
 public:
  CurrentDevice(int device, std::string_view who, SetDevice when = SetDevice::when_different) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      (void)cudaGetLastError();
      previous_ = -1;
    }
    if (when == SetDevice::always || previous_ != device)
      check_cuda(cudaSetDevice(device), "cudaSetDevice(device)", __FILE__, __LINE__, who);
  }
  ~CurrentDevice() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace aperture::detail
