// src/common/format.h — a small "{}"-placeholder formatter for error messages.
//
// g++ 12 (the CI compiler) has no <format>; under g++ 13 (the GPU machine's) it may be in scope,
// which the literal overload below keeps out of the way. Supported: "{}" (operator<<) and "{:#x}"
// (hex with 0x). Extra or missing arguments show as "{?}" rather than throwing: a message is
// never lost.
#pragma once

#include <cstddef>
#include <ios>
#include <sstream>
#include <string>
#include <string_view>

namespace aperture::detail {

namespace format_impl {
inline void append_rest(std::ostringstream& out, std::string_view text) {
  for (std::size_t at = 0; at < text.size();) {
    const auto open = text.find('{', at);
    if (open == std::string_view::npos) {
      out << text.substr(at);
      return;
    }
    const auto close = text.find('}', open);
    out << text.substr(at, open - at) << "{?}";
    at = close == std::string_view::npos ? text.size() : close + 1;
  }
}

template <class First, class... Rest>
void append(std::ostringstream& out, std::string_view text, const First& first, const Rest&... rest) {
  const auto open = text.find('{');
  const auto close = open == std::string_view::npos ? open : text.find('}', open);
  if (close == std::string_view::npos) {
    out << text;
    return;
  }
  out << text.substr(0, open);
  const std::string_view spec = text.substr(open + 1, close - open - 1);
  if (spec == ":#x") {
    out << "0x" << std::hex << first << std::dec;
  } else {
    out << first;
  }
  text.remove_prefix(close + 1);
  if constexpr (sizeof...(rest) > 0) {
    append(out, text, rest...);
  } else {
    append_rest(out, text);
  }
}
}  // namespace format_impl

template <class... Args>
std::string format_view(std::string_view text, const Args&... args) {
  std::ostringstream out;
  if constexpr (sizeof...(args) == 0) {
    out << text;
  } else {
    format_impl::append(out, text, args...);
  }
  return out.str();
}

template <class... Args>
std::string format(std::string_view text, const Args&... args) {
  return detail::format_view(text, args...);
}

// A literal format string, as every call passes: the literal binds exactly here but only by a
// conversion to std::format's format_string, so where <format> is in scope (g++ 13 and later)
// an unqualified call with a std:: argument, which brings std::format in by argument-dependent
// lookup, still resolves to this one instead of being ambiguous (the forwarding references tie
// std::format's on the other arguments).
template <std::size_t N, class... Args>
std::string format(const char (&text)[N], Args&&... args) {
  return detail::format_view(std::string_view(text), args...);
}

}  // namespace aperture::detail
