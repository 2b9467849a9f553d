// src/providers/own_heap/symmetric_heap.h — the allocator behind our own symmetric heaps.
//
// Works on offsets, not addresses: every rank runs the same sequence of allocate/free calls on
// its own copy of this allocator, and because it is deterministic every rank gets the same
// offset. That is what makes the heap linear (one table serves every allocation).
//
// First fit over an ordered free list, coalescing neighbours on free. Sizes are rounded up to
// kGranule bytes, so even a 0-byte allocation has an address of its own.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

namespace aperture::detail {

class SymmetricHeap {
 public:
  static constexpr std::size_t kGranule = 64;

  explicit SymmetricHeap(std::size_t capacity);

  // The offset of a fresh block of `bytes` (rounded up) aligned to `alignment` (a power of two),
  // or nullopt when no free block is large enough.
  std::optional<std::size_t> allocate(std::size_t bytes, std::size_t alignment);
  // Releases the block at `offset`; false when no live block starts there (double free).
  bool free(std::size_t offset);
  // The live block containing [offset, offset + bytes): its start and requested size.
  std::optional<std::pair<std::size_t, std::size_t>> find(std::size_t offset, std::size_t bytes) const;

  std::size_t capacity() const { return capacity_; }
  std::size_t bytes_in_use() const { return in_use_; }
  std::size_t largest_free_block() const;
  // Why allocate(bytes, alignment) found no room: "no free block of B bytes (alignment A): U of C
  // bytes in use in N allocations, largest free block F bytes", for the providers' errors.
  std::string describe_no_room(std::size_t bytes, std::size_t alignment) const;
  std::size_t live_blocks() const { return live_.size(); }

 private:
  struct Block {
    std::size_t reserved;   // bytes taken from the free list, including alignment padding
    std::size_t start;      // where the reservation begins (<= the returned offset)
    std::size_t requested;  // what the caller asked for
  };
  std::size_t capacity_;
  std::size_t in_use_ = 0;
  std::map<std::size_t, std::size_t> free_;  // offset -> length
  std::map<std::size_t, Block> live_;        // returned offset -> block
};

}  // namespace aperture::detail
