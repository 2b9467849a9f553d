// src/launcher/mpi_output_tags.cpp — reading mpirun's --tag-output lines back into ranks.
#include "launcher/mpi_output_tags.h"

#include <cctype>
#include <optional>

namespace aperture::launcher {

namespace {

struct Tag {
  long job = 0;
  int rank = 0;
  bool is_stdout = false;
  std::size_t length = 0;
};

// Reads "[digits" and returns the number; advances `at`.
std::optional<long> number_at(std::string_view text, std::size_t& at) {
  const std::size_t start = at;
  long value = 0;
  while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])) && at - start < 9)
    value = value * 10 + (text[at++] - '0');
  if (at == start) return std::nullopt;
  return value;
}

std::optional<Tag> tag_at(std::string_view text, std::size_t at) {
  const std::size_t start = at;
  if (at >= text.size() || text[at++] != '[') return std::nullopt;
  const auto job = number_at(text, at);
  if (!job || at >= text.size() || text[at++] != ',') return std::nullopt;
  const auto rank = number_at(text, at);
  if (!rank || at >= text.size() || text[at++] != ']') return std::nullopt;
  for (const std::string_view stream : {"<stdout>:", "<stderr>:", "<stddiag>:"}) {
    if (text.substr(at, stream.size()) == stream)
      return Tag{*job, static_cast<int>(*rank), stream == "<stdout>:", at + stream.size() - start};
  }
  return std::nullopt;
}

}  // namespace

std::vector<TaggedPiece> split_tagged_line(std::string_view line) {
  std::vector<TaggedPiece> pieces;
  std::optional<Tag> current;
  std::size_t text_start = 0;
  std::optional<long> job;
  for (std::size_t at = 0; at < line.size(); ++at) {
    if (line[at] != '[') continue;
    const auto tag = tag_at(line, at);
    if (!tag || (job && tag->job != *job)) continue;
    if (at > text_start || current)
      pieces.push_back({current ? current->rank : -1, current && current->is_stdout, line.substr(text_start, at - text_start)});
    job = tag->job;
    current = tag;
    text_start = at + tag->length;
    at = text_start - 1;
  }
  if (line.size() > text_start || current || pieces.empty())
    pieces.push_back({current ? current->rank : -1, current && current->is_stdout, line.substr(text_start)});
  return pieces;
}

}  // namespace aperture::launcher
