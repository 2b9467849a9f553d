// tests/common/counted_check.h — GoogleTest checks for the programs that print how many checks
// they made (the GPU proxy's tests, the multi-node engine tests): write
//
//     EXPECT_TRUE(test::counted(got == want)) << test::text("element %zu: %lld", i, got);
//
// A failure is GoogleTest's (file:line, the message); test::checks counts every check made, for
// the "PASS ...: N checks" line those programs end with. The message is formatted only on
// failure; after ten failures the rest are counted in test::failures, not printed. CUDA_OK (CUDA sources) stops the program at a failed CUDA call, naming it: after one,
// nothing the test would check can be trusted.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace test {

// Atomic: producer threads check too (GoogleTest's EXPECT_* are thread-safe).
inline std::atomic<unsigned long long> checks{0};
inline std::atomic<unsigned long long> failures{0};
constexpr unsigned long long kReported = 10;  // failures GoogleTest reports; the rest are counted

// Counts the check; a failure beyond the tenth is counted but not reported again (the test has
// failed already; a broken path would otherwise print one line per element).
inline bool counted(bool ok) {
  checks.fetch_add(1, std::memory_order_relaxed);
  return ok || failures.fetch_add(1, std::memory_order_relaxed) >= kReported;
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
inline std::string text(const char* format, ...) {
  va_list args;
  va_start(args, format);
  char buffer[512];
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  return buffer;
}

}  // namespace test

#if defined(__CUDACC__)
#  define CUDA_OK(call)                                                                                        \
    do {                                                                                                       \
      const cudaError_t status_ = (call);                                                                      \
      if (status_ != cudaSuccess) {                                                                            \
        std::fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(status_)); \
        std::exit(1);                                                                                          \
      }                                                                                                        \
    } while (0)
#endif
