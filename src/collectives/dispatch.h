// src/collectives/dispatch.h — one collective call, as the host class hands it to the CPU code
// (host.cpp) or to the GPU launchers (device.cu; device_none.cpp without CUDA), and the one way
// both turn it into compiled code (dispatch_call, dispatch_reduction): by its kind's row
// (collective_kinds.h) and its element type's (element_types.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "aperture/collectives/handle.h"
#include "aperture/collectives/types.h"
#include "aperture/error.h"
#include "collective_kinds.h"
#include "element_types.h"

namespace aperture::collectives::detail {

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

// The barrier and the data movements: moves.template operator()<K, W>() with K = c.kind and W
// the unsigned word of the element's size (std::byte for the barrier, which moves none). The
// reductions: reduces.template operator()<D>() with D = c.type, which runs
// dispatch_reduction<T> in the file compiled for that type (the reductions of all types do not
// share one file: src/collectives/CMakeLists.txt).
template <class Moves, class Reduces>
void dispatch_call(const Call& c, Moves&& moves, Reduces&& reduces) {
  visit_kind(c.kind, [&]<Kind K>() {
    if constexpr (row_of(K).shape == Shape::barrier) {
      moves.template operator()<K, std::byte>();
    } else if constexpr (moves_data(K)) {
      visit_word(size_of(c.type), [&]<class W>() { moves.template operator()<K, W>(); });
    } else {
      visit_element_type(c.type, [&]<DataType D>() { reduces.template operator()<D>(); });
    }
  });
}

// A reduction of one element type: f.template operator()<K, Op>() with K = c.kind, Op = c.op.
template <class F>
void dispatch_reduction(const Call& c, F&& f) {
  visit_reduce_op(c.op, [&]<ReduceOp Op>() {
    visit_kind(c.kind, [&]<Kind K>() {
      if constexpr (reduces(K)) {
        f.template operator()<K, Op>();
      } else {
        throw Error(ErrorCode::internal, "collectives: internal: not a reduction");
      }
    });
  });
}

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
