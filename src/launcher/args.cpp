// src/launcher/args.cpp — strict parsing of command-line values.
#include "launcher/args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace aperture::launcher {

namespace {
std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }
}  // namespace

long parse_integer(std::string_view what, std::string_view text, long min, long max) {
  const std::string copy(text);
  const bool digits_only = !copy.empty() && copy.find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  char* end = nullptr;
  const long value = digits_only ? std::strtol(copy.c_str(), &end, 10) : 0;
  if (!digits_only || errno == ERANGE || *end != '\0' || value < min || value > max)
    throw UsageError(std::string(what) + " " + quoted(text) + ": expected a whole number from " + std::to_string(min) +
                     " to " + std::to_string(max));
  return value;
}

double parse_seconds(std::string_view what, std::string_view text) {
  const std::string copy(text);
  char* end = nullptr;
  const double value = copy.empty() ? 0.0 : std::strtod(copy.c_str(), &end);
  // strtod also reads "inf", "nan" and hex floats; a plain decimal is all we accept.
  const bool plain = !copy.empty() && copy.find_first_not_of("0123456789.") == std::string::npos;
  if (!plain || *end != '\0' || !(value > 0) || value > 1e7)
    throw UsageError(std::string(what) + " " + quoted(text) + ": expected a positive number of seconds, e.g. 30 or 0.5");
  return value;
}

std::size_t parse_bytes(std::string_view what, std::string_view text) {
  std::string digits(text);
  std::size_t unit = 1;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K': case 'k': unit = std::size_t{1} << 10; break;
      case 'M': case 'm': unit = std::size_t{1} << 20; break;
      case 'G': case 'g': unit = std::size_t{1} << 30; break;
      default: break;
    }
    if (unit != 1) digits.pop_back();
  }
  const bool ok = !digits.empty() && digits.size() <= 15 && digits.find_first_not_of("0123456789") == std::string::npos;
  if (!ok)
    throw UsageError(std::string(what) + " " + quoted(text) +
                     ": expected a byte count such as 4096, 64K, 1M or 2G (binary units)");
  const unsigned long long value = std::strtoull(digits.c_str(), nullptr, 10);
  if (value > std::numeric_limits<std::size_t>::max() / unit)
    throw UsageError(std::string(what) + " " + quoted(text) + ": too large");
  return static_cast<std::size_t>(value) * unit;
}

std::string format_bytes(std::size_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (unit < 4 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + " " + kUnits[unit];
}

bool take_option_value(int argc, char** argv, int& i, std::string_view short_name, std::string_view long_name,
                       std::string& value, std::string_view example) {
  const std::string_view arg = argv[i];
  const auto missing = [&](std::string_view name) {
    return UsageError(std::string(name) + " needs a value, e.g. " + std::string(name) + " " + std::string(example));
  };
  for (const std::string_view name : {short_name, long_name}) {
    if (name.empty() || arg.substr(0, name.size()) != name) continue;
    const std::string_view rest = arg.substr(name.size());
    if (rest.empty()) {
      if (i + 1 >= argc) throw missing(name);
      value = argv[++i];
      ++i;
      return true;
    }
    if (rest.front() == '=') {
      value = std::string(rest.substr(1));
      if (value.empty()) throw missing(name);
      ++i;
      return true;
    }
    // "-n4": only a one-letter short option may be glued to its value.
    if (name == short_name && name.size() == 2) {
      value = std::string(rest);
      ++i;
      return true;
    }
  }
  return false;
}

}  // namespace aperture::launcher
