// launcher/args.h — strict parsing of command-line values, shared by every subcommand.
//
// A bad value is a UsageError: the message names the option, the value given and what would be
// accepted, and the program exits with kExitUsage. Nothing here guesses ("4x" is not 4).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace aperture::launcher {

// The exit code of a program given bad arguments (launch.h lists the launcher's others).
inline constexpr int kExitUsage = 2;  // bad arguments, program not found or not executable

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A decimal integer in [min, max]; `what` names the option in the message (e.g. "-n").
long parse_integer(std::string_view what, std::string_view text, long min, long max);
// A positive number of seconds (fractions allowed), at most ten million.
double parse_seconds(std::string_view what, std::string_view text);
// A byte count: a decimal integer with an optional binary suffix K, M or G (KiB, MiB, GiB).
std::size_t parse_bytes(std::string_view what, std::string_view text);

// "1 MiB", "12 KiB", "100 B": the largest unit that divides the value exactly.
std::string format_bytes(std::size_t bytes);

// Matches `--name VALUE` and `--name=VALUE` (and `-n VALUE`, `-nVALUE` for a one-letter short
// name) at argv[i]. On a match stores the value, advances i past it and returns true; throws a
// UsageError when the value is missing, quoting `example` as a value that would do.
bool take_option_value(int argc, char** argv, int& i, std::string_view short_name, std::string_view long_name,
                       std::string& value, std::string_view example = "4");

}  // namespace aperture::launcher
