// aperture/error.h — the one exception type at the API boundary.
//
// Every host-side failure is an aperture::Error whose message names the call that failed, the
// values involved and what to do about it. CUDA, NCCL, NVSHMEM, MPI and system errors are
// translated into it; nothing in aperture exits the process.
//
// Programs branch on code(), never on the text: what() ("aperture: <detail>") is for people and
// may be reworded. call() names the library or system function that failed ("cudaMalloc",
// "MPI_Win_allocate_shared"), or is empty when aperture itself refused.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "aperture/export.h"

namespace aperture {

// Why a call failed, as far as a caller can act on it. The values travel between ranks (the
// rendezvous hub reports a job's failure with its code): never renumber them.
enum class ErrorCode : int {
  invalid_argument = 1,  // an argument or environment variable aperture cannot use: fix the call
  timeout = 2,           // a wait gave up after APERTURE_TIMEOUT: a peer is stuck, or only slow
  peer_lost = 3,         // another rank, the launcher or the hub died or failed first
  mismatch = 4,          // ranks disagree: different collective calls, sizes, roots or jobs
  unavailable = 5,       // a provider, library, device or launcher this needs is not here
  out_of_memory = 6,     // a heap, device or address space is full
  system = 7,            // an operating-system, CUDA, NCCL, NVSHMEM or MPI call failed
  internal = 8,          // anything else: an unclassified failure or a broken invariant
};

// "invalid_argument", "timeout", ...: the enumerator's name.
constexpr std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::timeout: return "timeout";
    case ErrorCode::peer_lost: return "peer_lost";
    case ErrorCode::mismatch: return "mismatch";
    case ErrorCode::unavailable: return "unavailable";
    case ErrorCode::out_of_memory: return "out_of_memory";
    case ErrorCode::system: return "system";
    case ErrorCode::internal: return "internal";
  }
  return "internal";
}

class APERTURE_API Error : public std::runtime_error {
 public:
  using Code = ErrorCode;

  // An unclassified failure (code internal). Deprecated: nothing in aperture throws one any more,
  // and code() is what programs branch on; kept for one release for programs that make their own.
  [[deprecated("give the failure a code: aperture::Error(ErrorCode::..., message)")]]
  explicit Error(const std::string& message) : Error(ErrorCode::internal, message) {}
  // `detail` is the message without the "aperture: " prefix; `call` the function that failed.
  Error(ErrorCode code, const std::string& detail, std::string_view call = {})
      : std::runtime_error(std::string(kPrefix) + detail),
        code_(code),
        call_(call.empty() ? nullptr : std::make_shared<const std::string>(call)) {}

  ErrorCode code() const noexcept { return code_; }
  // The failed library or system function, or "" when aperture itself refused.
  std::string_view call() const noexcept { return call_ ? std::string_view(*call_) : std::string_view(); }
  // The message without the "aperture: " prefix, for wrapping into another message.
  std::string_view detail() const noexcept { return std::string_view(what()).substr(kPrefix.size()); }

 private:
  static constexpr std::string_view kPrefix = "aperture: ";
  ErrorCode code_;
  std::shared_ptr<const std::string> call_;  // shared: copying an exception must not throw
};

}  // namespace aperture
