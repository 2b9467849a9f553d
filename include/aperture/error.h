// aperture/error.h — the one exception type at the API boundary.
//
// Every host-side failure is an aperture::Error whose message names the call that failed, the
// values involved and what to do about it. CUDA, NCCL, NVSHMEM, MPI and system errors are
// translated into it; nothing in aperture exits the process.
#pragma once

#include <stdexcept>
#include <string>

#include "aperture/export.h"

namespace aperture {

class APERTURE_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error("aperture: " + message) {}
};

}  // namespace aperture
