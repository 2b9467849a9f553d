// aperture/collectives/detail/partition.h — how a collective splits its elements.
//
// Between parts (CUDA blocks of one rank), between ranks (the chunks of a reduce-scatter inside
// an all-reduce) and into pieces that fit a staging half, always in whole 16-byte vectors, so
// every staging address stays aligned for vector loads and stores. Every rank computes the same
// split from the same arguments: no split is ever communicated.
#pragma once

#include <cstdint>

#include "aperture/collectives/handle.h"
#include "aperture/config.h"
#include "aperture/coop_rma.h"

namespace aperture::collectives::detail {

// Elements per 16-byte vector; work is split between groups and chunks in multiples of it, so
// every piece of staging memory stays 16-byte aligned.
template <class T>
inline constexpr std::uint64_t kVectorElements =
    sizeof(T) >= aperture::detail::kVectorBytes ? 1 : aperture::detail::kVectorBytes / sizeof(T);

struct Range {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  APERTURE_HD std::uint64_t size() const { return end - begin; }
};

// Piece i of `ways` of [0, count), cut at multiples of T's vector; the last piece takes the rest.
template <class T>
APERTURE_HD Range split(std::uint64_t count, int ways, int i) {
  constexpr std::uint64_t V = kVectorElements<T>;
  const std::uint64_t vectors = (count + V - 1) / V;
  const auto at = [&](int k) -> std::uint64_t {
    const std::uint64_t e = vectors * static_cast<std::uint64_t>(k) / static_cast<std::uint64_t>(ways) * V;
    return e < count ? e : count;
  };
  return Range{at(i), i + 1 == ways ? count : at(i + 1)};
}

// Elements of T that fit `slots` equal, vector-aligned slots of one staging half: what one
// piece (one barrier) of a collective moves per slot.
template <class T>
APERTURE_HD std::uint64_t piece_capacity(const CollectiveHandle& h, std::uint64_t slots) {
  constexpr std::uint64_t V = kVectorElements<T>;
  const std::uint64_t n = h.half_bytes / slots / sizeof(T) / V * V;
  return n > 0 ? n : V;  // the Communicator guarantees a half holds a vector per slot
}

// The piece loop of every collective: body(at, n, more) for each piece of this part (at most
// `capacity` elements; `more`: another piece of this part may follow), in order, until body
// returns false. Each part takes one contiguous slice, split(count, parts, part), in pieces.
template <class T, class Coop, class Body>
APERTURE_HD void for_each_piece(const Coop& g, std::uint64_t count, std::uint64_t capacity, Body&& body) {
  const Range mine = split<T>(count, static_cast<int>(g.meta_group_size()), static_cast<int>(g.meta_group_rank()));
  for (std::uint64_t at = mine.begin; at < mine.end; at += capacity) {
    const std::uint64_t n = mine.end - at < capacity ? mine.end - at : capacity;
    if (!body(at, n, at + n < mine.end)) return;
  }
}

// A slot's stride in elements: the piece length rounded up to a whole vector.
template <class T>
APERTURE_HD std::uint64_t slot_stride(std::uint64_t n) {
  constexpr std::uint64_t V = kVectorElements<T>;
  return (n + V - 1) / V * V;
}

}  // namespace aperture::collectives::detail
