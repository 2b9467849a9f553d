// tests/common/plain_check.h — the checks of the plain test programs (no GoogleTest: the GPU
// proxy's programs, the multi-node engine programs). EXPECT counts every check in test::checks,
// counts the failed ones in test::failures and prints the first ten with their line; a program
// ends with test::failures == 0 as its verdict. CUDA_OK (CUDA sources) stops the program at a
// failed CUDA call, naming it.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace test {
inline unsigned long long checks = 0;
inline int failures = 0;
}  // namespace test

#define EXPECT(cond, ...)                                     \
  do {                                                        \
    ++test::checks;                                           \
    if (!(cond) && test::failures++ < 10) {                   \
      std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                      \
      std::fprintf(stderr, "\n");                             \
    }                                                         \
  } while (0)

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
