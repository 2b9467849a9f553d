// src/providers/own_heap/linear_heap_provider.h — what aperture's own-heap providers (shm, cuda-ipc,
// cuda-vmm) share: one SymmetricHeap of offsets, one table of where each rank's heap is mapped
// here, and allocate / free / symmetric_address_map on top of them.
//
// Every rank runs the same calls on its own copy of the heap, so every rank gets the same offset
// and an allocation's table is the heap table shifted by it: the heap is linear. What stays with
// each provider is what is truly its own: how its segment is made, exported and mapped into the
// peers (it fills bases_), how much of it is backed (mapped_bytes), where a table lives for its
// kernels (place_table), and any collective work before a block is handed out (make_room). A
// provider whose ranks may sit on other nodes opens an engine over its heap into engine_, and
// every map made of the heap gets it.
//
// Requests are compared across ranks before they are judged, so a bad request on one rank fails
// every rank at once instead of leaving the others waiting for it until APERTURE_TIMEOUT.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "aperture/address_map.h"
#include "aperture/provider.h"
#include "aperture/team.h"
#include "engines/engine_attachment.h"
#include "providers/own_heap/symmetric_heap.h"

namespace aperture::detail {

// How a heap is named in its provider's messages.
struct HeapNames {
  const char* who;            // the provider: "shm"
  const char* heap;           // "heap", "GPU heap"
  const char* size_variable;  // what to raise when it is full: "APERTURE_HEAP_SIZE"
};

class LinearHeapProvider : public Provider {
 public:
  std::string_view name() const final { return names_.who; }
  bool is_linear() const final { return true; }

  // Collective. Compared across ranks first, then judged; every rank takes the same block.
  Allocation allocate(std::size_t bytes, std::size_t alignment) final;
  // Collective. Judged locally, then compared: every rank learns together whether it is valid.
  // Marks the allocation's map freed, for every copy of it.
  void free(Allocation& allocation) final;
  SymmetricAddressMap symmetric_address_map(const void* ptr, std::size_t bytes) const final;

 protected:
  LinearHeapProvider(Team& team, HeapNames names, std::size_t capacity);

  // The largest alignment every rank's heap honours at every address (the same on every rank).
  virtual std::size_t max_alignment() const = 0;
  // Bytes from this rank's base that are backed by memory: only they are handed out or owned.
  virtual std::size_t mapped_bytes() const = 0;
  // The map of `table` (an allocation's or a view's), placed where this provider's kernels read.
  virtual SymmetricAddressMap place_table(std::vector<std::int64_t> table, std::size_t bytes) const = 0;
  // Called on every rank alike once the block at `offset` is taken; collective work before it is
  // handed out goes here (cuda-vmm maps more of its heap). When it throws, the block is given back.
  virtual void make_room(std::size_t /*offset*/, std::size_t /*bytes*/) {}

  std::uintptr_t own_base() const {
    return bases_.empty() ? 0 : static_cast<std::uintptr_t>(bases_[team_.rank()]);
  }

  Team& team_;
  SymmetricHeap heap_;
  std::vector<std::int64_t> bases_;  // where each rank's heap is mapped here; 0: not direct
  // Reaches this rank's heap from ranks on other nodes (multi-node jobs), over the whole heap.
  // The provider releases it before its memory goes.
  EngineAttachment engine_;

 private:
  // Where `ptr` is in this rank's heap; aperture::Error when it is not in it.
  std::size_t offset_of(const void* ptr, const char* call) const;
  // The map of [offset, offset + bytes): the heap table shifted by `offset`, placed, with the
  // heap's engine attached.
  SymmetricAddressMap map_for(std::size_t offset, std::size_t bytes) const;
  // "" when `allocation` is a live allocation of this heap that free may release; what is wrong
  // with it otherwise. Sets `offset`.
  std::string free_error(const Allocation& allocation, std::size_t& offset) const;

  HeapNames names_;
};

}  // namespace aperture::detail
