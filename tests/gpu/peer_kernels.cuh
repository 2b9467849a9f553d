// tests/gpu/peer_kernels.cuh — what the kernel tests of tests/gpu share: a thread's index, the
// fill kernel, and what a buffer of per-peer slots must hold afterwards (pattern() values
// distinct per rank, element and salt, so a wrong peer or offset shows). The operations against
// every provider's memory live in the conformance suite (tests/conformance/peer_operations.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu_test.h"

namespace gputest {

constexpr std::size_t kChunk = 32;  // elements one thread puts, gets or copies

__device__ inline std::size_t thread_index() { return blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; }
__device__ inline std::size_t thread_count() { return static_cast<std::size_t>(gridDim.x) * blockDim.x; }

template <class T>
__global__ void fill(T* data, std::size_t count, int rank, int salt) {
  for (std::size_t i = thread_index(); i < count; i += thread_count()) data[i] = pattern<T>(rank, i, salt);
}

// ---- what they leave behind ----------------------------------------------------------------------

// Expected contents of `slots` slots of `count`: slot s holds pattern(source_of(s), i, salt)
// where written(s), else 0.
template <class T, class Written, class Source>
std::vector<T> expected_slots(std::size_t slots, std::size_t count, int salt, Written written, Source source_of) {
  std::vector<T> expected(slots * count, T(0));
  for (std::size_t s = 0; s < slots; ++s)
    if (written(s))
      for (std::size_t i = 0; i < count; ++i) expected[s * count + i] = pattern<T>(source_of(s), i, salt);
  return expected;
}

// An inbox after store or put: slot s holds source s's values where s reaches this rank.
template <class T>
std::vector<T> expected_from_sources(const Job& job, std::size_t count, int salt) {
  return expected_slots<T>(
      job.n, count, salt, [&](std::size_t s) { return job.reaches(int(s), job.me); },
      [](std::size_t s) { return int(s); });
}

// A result after load or get: slot p holds peer p's values where this rank reaches p.
template <class T>
std::vector<T> expected_from_peers(const Job& job, std::size_t count, int salt) {
  return expected_slots<T>(
      job.n, count, salt, [&](std::size_t p) { return job.reaches(job.me, int(p)); },
      [](std::size_t p) { return int(p); });
}

}  // namespace gputest
