// examples/demo/demo_block_group.cuh — one CUDA block as the demo's Group (see demo_algorithm.h): its
// threads share the copies, thread 0 signals and waits, and a wait gives up after timeout_ns.
#pragma once

#include <cstdint>

#include "demo_algorithm.h"

#include "aperture/signal.h"

namespace aperture::demo {

struct BlockGroup {
  std::uint64_t timeout_ns = 0;

  __device__ std::uint64_t thread() const { return threadIdx.x; }
  __device__ std::uint64_t threads() const { return blockDim.x; }
  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ void sync() const { __syncthreads(); }
  // The other threads' stores reached this one through __syncthreads; the system fence makes
  // them visible to other GPUs before the leader's signal.
  __device__ void fence() const { __threadfence_system(); }
  __device__ bool wait(const std::uint64_t* flag, std::uint64_t value) const {
    int ok = 1;
    if (leader()) ok = aperture::wait_until_ge_for(flag, value, timeout_ns, nullptr) ? 1 : 0;
    return __syncthreads_and(ok) != 0;
  }
  __device__ void record_wrong(demo::Check* check, int phase, int step, int origin, std::uint64_t index,
                               std::int64_t got, std::int64_t expected) const {
    if (atomicAdd(&check->wrong, 1ull) != 0) return;
    check->first_phase = phase;
    check->first_step = step;
    check->first_origin = origin;
    check->first_index = index;
    check->first_got = got;
    check->first_expected = expected;
  }
};

}  // namespace aperture::demo
