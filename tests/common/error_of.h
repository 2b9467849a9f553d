// tests/common/error_of.h — the message of the aperture::Error a call throws, for tests that check
// what a refusal says. Shared by the GoogleTest suites and the plain GPU programs (no GoogleTest
// here: the GPU machine may not have it).
#pragma once

#include <aperture/error.h>

#include <string>

namespace test {

// The message of the aperture::Error `call` throws, or "(no error)" when it throws none (any
// other exception escapes: it is a bug, not a refusal).
template <class Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const aperture::Error& e) {
    return e.what();
  }
  return "(no error)";
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace test
