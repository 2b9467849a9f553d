// tests/fuzz/fuzz_check.h — what every fuzz target uses to call a broken property a crash.
#pragma once

#include <cstdio>
#include <cstdlib>

// A property the code under test promises failed: print it and abort, so libFuzzer keeps the
// input as a crash (the input, not only the sanitizers, decides what counts as a bug).
#define FUZZ_CHECK(condition, ...)                                                  \
  do {                                                                              \
    if (!(condition)) {                                                             \
      std::fprintf(stderr, "fuzz property failed at %s:%d: %s\n  ", __FILE__, __LINE__, #condition); \
      std::fprintf(stderr, __VA_ARGS__);                                            \
      std::fprintf(stderr, "\n");                                                   \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)
