#include "providers/own_heap/symmetric_heap.h"

#include <iterator>

#include "common/format.h"

namespace aperture::detail {

namespace {
std::size_t round_up(std::size_t value, std::size_t to) { return (value + to - 1) / to * to; }
}  // namespace

SymmetricHeap::SymmetricHeap(std::size_t capacity) : capacity_(capacity / kGranule * kGranule) {
  if (capacity_ > 0) free_.emplace(0, capacity_);
}

std::optional<std::size_t> SymmetricHeap::allocate(std::size_t bytes, std::size_t alignment) {
  if (bytes > capacity_) return std::nullopt;
  const std::size_t size = round_up(bytes == 0 ? 1 : bytes, kGranule);
  if (alignment < kGranule) alignment = kGranule;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const auto [start, length] = *it;
    const std::size_t aligned = round_up(start, alignment);
    if (aligned < start || aligned - start > length || length - (aligned - start) < size) continue;
    const std::size_t end = aligned + size;
    free_.erase(it);
    // The alignment gap before the block stays free; so does the tail after it.
    if (aligned > start) free_.emplace(start, aligned - start);
    if (start + length > end) free_.emplace(end, start + length - end);
    live_.emplace(aligned, Block{size, aligned, bytes});
    in_use_ += size;
    return aligned;
  }
  return std::nullopt;
}

bool SymmetricHeap::free(std::size_t offset) {
  const auto it = live_.find(offset);
  if (it == live_.end()) return false;
  std::size_t start = it->second.start;
  std::size_t length = it->second.reserved;
  in_use_ -= length;
  live_.erase(it);
  // Merge with the free neighbours on both sides.
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + length) {
    length += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == start) {
      start = previous->first;
      length += previous->second;
      free_.erase(previous);
    }
  }
  free_.emplace(start, length);
  return true;
}

std::optional<std::pair<std::size_t, std::size_t>> SymmetricHeap::find(std::size_t offset, std::size_t bytes) const {
  auto it = live_.upper_bound(offset);
  if (it == live_.begin()) return std::nullopt;
  --it;
  const std::size_t start = it->first;
  const std::size_t requested = it->second.requested;
  if (offset - start > requested || bytes > requested - (offset - start)) return std::nullopt;
  return std::pair{start, requested};
}

std::size_t SymmetricHeap::largest_free_block() const {
  std::size_t largest = 0;
  for (const auto& [start, length] : free_) largest = std::max(largest, length);
  return largest;
}

std::string SymmetricHeap::describe_no_room(std::size_t bytes, std::size_t alignment) const {
  return detail::format("no free block of {} bytes (alignment {}): {} of {} bytes in use in {} allocations, largest "
                        "free block {} bytes",
                        bytes, alignment, in_use_, capacity_, live_.size(), largest_free_block());
}

}  // namespace aperture::detail
