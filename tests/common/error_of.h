// tests/common/error_of.h — the message (or the code) of the aperture::Error a call throws, for
// tests that check what a refusal says and what kind of refusal it is. Shared by the GoogleTest
// suites and the plain GPU programs (no GoogleTest here: the GPU machine may not have it).
#pragma once

#include <aperture/error.h>

#include <optional>
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

// The code of the aperture::Error `call` throws, or nullopt when it throws none.
template <class Call>
std::optional<aperture::ErrorCode> code_of(Call&& call) {
  try {
    call();
  } catch (const aperture::Error& e) {
    return e.code();
  }
  return std::nullopt;
}

// What a refused call threw: its message and code (or "(no error)" and nullopt). For collective
// calls, which can run only once per check.
struct Refusal {
  std::string message = "(no error)";
  std::optional<aperture::ErrorCode> code;
};
template <class Call>
Refusal refusal_of(Call&& call) {
  try {
    call();
  } catch (const aperture::Error& e) {
    return {e.what(), e.code()};
  }
  return {};
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace test
