// tests/gpu/misuse_checks.h — the refusals every GPU provider must make, each with a message
// that says what is wrong: stale copies of a freed allocation, memory no provider of aperture's
// allocated, and alignments that are no power of two (or differ between ranks).
#pragma once

#include <cuda_runtime.h>

#include <aperture/aperture.h>

#include "../common/error_of.h"
#include "gpu_test.h"

namespace gputest {

// Frees `a`, then checks that its copy is refused: free marks the map freed for every copy, so
// the checked path refuses it, and freeing it again is refused. Returns the stale copy.
inline aperture::Allocation free_and_check_stale_copy(Job& job, aperture::Provider& provider, aperture::Allocation& a) {
  auto copy = a;
  provider.free(a);
  CHECK(copy.map.freed());
  const auto stale = test::error_of([&] { aperture::checked_translate(copy.map, copy.as<char>(), job.me); });
  CHECK_MSG(test::contains(stale, "use after free"), stale);
  const auto twice = test::error_of([&] { provider.free(copy); });
  CHECK_MSG(test::contains(twice, "freed twice"), twice);
  return copy;
}

// Plain cudaMalloc memory is another provider's: free and symmetric_address_map refuse it.
inline void check_foreign_memory_refused(Job& job, aperture::Provider& provider) {
  void* foreign = nullptr;
  APERTURE_CUDA_CHECK(cudaMalloc(&foreign, 256), "test");
  aperture::Allocation stranger{foreign, 256, {}};
  const auto not_ours = test::error_of([&] { provider.free(stranger); });
  CHECK_MSG(test::contains(not_ours, "another provider"), not_ours);
  const auto not_ours_map = test::error_of([&] { provider.symmetric_address_map(foreign, 16); });
  CHECK_MSG(test::contains(not_ours_map, "another provider"), not_ours_map);
  APERTURE_CUDA_CHECK(cudaFree(foreign), "test");
}

// An alignment that is no power of two is refused; a bad request on one rank fails every rank at
// once (compared before it is judged), no hang.
inline void check_bad_alignment_refused(Job& job, aperture::Provider& provider) {
  const auto odd = test::error_of([&] { provider.allocate(100, 3); });
  CHECK_MSG(test::contains(odd, "not a power of two"), odd);
  if (job.n > 1) {
    const auto one_bad = test::error_of([&] { provider.allocate(100, job.me == job.n - 1 ? 3 : 256); });
    CHECK_MSG(test::contains(one_bad, "mismatch") && test::contains(one_bad, "alignment=3"), one_bad);
  }
}

}  // namespace gputest
