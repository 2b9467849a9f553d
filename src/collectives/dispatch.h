// src/collectives/dispatch.h — one collective call, as the host class hands it to the CPU code
// (host.cpp) or to the GPU launchers (device.cu; device_none.cpp without CUDA).
#pragma once

#include <cstdint>

#include "aperture/collectives/handle.h"
#include "aperture/collectives/types.h"

namespace aperture::collectives::detail {

enum class Kind {
  barrier,
  broadcast,
  broadcast_ll,       // host memory only (aperture/collectives/broadcast.h)
  all_gather,
  reduce_scatter,
  all_reduce_one_shot,
  all_reduce_two_shot,
  all_to_all,
  all_gather_ll,      // the push paths (aperture/collectives/detail/ll.h)
  reduce_scatter_ll,
  all_reduce_ll,
  all_gather_direct,  // zero-copy on a symmetric input (aperture/collectives/detail/staged.h)
  reduce_scatter_direct,
  all_reduce_direct,
  all_reduce_two_shot_direct,
  all_to_all_direct,
};

struct Call {
  Kind kind = Kind::barrier;
  const void* in = nullptr;
  void* out = nullptr;
  std::uint64_t count = 0;
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  const std::int64_t* in_bases = nullptr;  // the *_direct kinds: the input's own peer table
};

// Runs the call on this thread (aperture::CoopHost); returns when this rank's part is done.
// `spins`: CoopHost::spins, the polls a wait makes before it yields.
void run_on_host(const CollectiveHandle& h, const Call& call, unsigned spins);

// --- GPU (device.cu, or device_none.cpp which throws saying CUDA was not built in) ---
bool device_support_compiled();
// The number of SMs of the device that owns `ptr`, and makes that device current.
int device_select(const void* ptr);
// Zeroes [base, base + bytes) of device memory and waits for it.
void device_zero(void* base, std::uint64_t bytes);
// Launches the call on `stream` with `parts` blocks of `threads` threads.
void device_launch(const CollectiveHandle& h, const Call& call, int parts, int threads, void* stream);
// Copies `bytes` from `in` to `out` on `stream` (the copy engine; a one-rank collective).
void device_copy(void* out, const void* in, std::uint64_t bytes, void* stream);
// Waits for `stream` and reads the kStatusWords status words (collectives/handle.h) into `words`.
void device_read_status(const CollectiveHandle& h, void* stream, std::uint64_t* words);
void device_synchronize();
// Throws aperture::Error unless `ptr` is null or memory a kernel on this GPU may read. Checks
// nothing while `stream` is being captured into a CUDA graph (no call there may disturb it).
void device_check_pointer(const char* call, const char* what, const void* ptr, void* stream);

}  // namespace aperture::collectives::detail
