// src/providers/live_allocations.h — the live allocations of a provider over a foreign allocator
// (mpi-window, openshmem, nvshmem, nccl): each one's map, what the provider must release it
// with, the engine that reaches it from other nodes (if any), and its number in allocation order.
//
// The numbers are what makes free safe to compare: every rank allocates in the same order, so
// the same allocation has the same number on every rank, and comparing the numbers across ranks
// catches ranks freeing different allocations, in a different order, or twice, on every rank
// at once instead of leaving some waiting in the foreign library's collective free.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "aperture/address_map.h"
#include "aperture/error.h"
#include "aperture/team.h"
#include "common/format.h"
#include "engines/engine_attachment.h"

namespace aperture::detail {

template <class Resource>
class LiveAllocations {
 public:
  struct Entry {
    std::uint64_t number = 0;
    SymmetricAddressMap map;
    Resource resource;
    EngineAttachment engine;  // opened over this allocation; closed before `resource` is released
  };

  // `engine`, when one is open over the allocation, is attached to its map (and every copy of it)
  // and to every view of it.
  void add(const Allocation& allocation, Resource resource, EngineAttachment engine = {}) {
    engine.attach(allocation.map, 0);
    live_.emplace(reinterpret_cast<std::uintptr_t>(allocation.ptr),
                  Entry{next_number_++, allocation.map, std::move(resource), std::move(engine)});
  }

  // Collective. Takes out the live allocation `allocation` names, once every rank has agreed
  // that each names the same one; marks its map freed for every copy of it and resets
  // `allocation`. Throws aperture::Error on every rank, changing nothing, otherwise.
  Entry take_for_free(Team& team, std::string_view who, Allocation& allocation) {
    auto found = live_.find(reinterpret_cast<std::uintptr_t>(allocation.ptr));
    // A copy of an Allocation freed before is refused even when its address was reused since.
    const bool freed_before = allocation.map.freed();
    if (freed_before) found = live_.end();
    const std::uint64_t number = found == live_.end() ? 0 : found->second.number;
    team.check_same(detail::format("{} free", who), {{"allocation_number", number}, {"bytes", allocation.bytes}});
    if (freed_before)
      throw Error(ErrorCode::invalid_argument,
                  detail::format("{} free: the allocation at {} was already freed (through a copy of this "
                                 "Allocation); it would be freed twice: free each allocation once",
                                 who, allocation.ptr));
    if (found == live_.end())
      throw Error(ErrorCode::invalid_argument,
                  detail::format("{} free: {} is not a live allocation of this provider (freed twice, or allocated by "
                                 "another provider); free each allocation once, with the provider that made it",
                                 who, allocation.ptr));
    Entry entry = std::move(found->second);
    live_.erase(found);
    allocation.map.mark_freed();  // every copy of this allocation's map now refuses the checked path
    allocation = Allocation{};
    return entry;
  }

  // The map of the live allocation holding all of [ptr, ptr + bytes); nullptr when none
  // overlaps it. A range that overlaps one but does not lie inside it is an aperture::Error.
  const SymmetricAddressMap* containing(std::string_view who, const void* ptr, std::size_t bytes) const {
    const Entry* entry = entry_containing(who, ptr, bytes);
    return entry == nullptr ? nullptr : &entry->map;
  }

  // The map of [ptr, ptr + bytes) inside a live allocation: `place(table)` of the sub-range's
  // table, with the allocation's engine attached. std::nullopt when no live allocation overlaps
  // the range; aperture::Error when one overlaps it without holding it all.
  template <class Place>
  std::optional<SymmetricAddressMap> view_of(std::string_view who, const void* ptr, std::size_t bytes,
                                             Place&& place) const {
    const Entry* entry = entry_containing(who, ptr, bytes);
    if (entry == nullptr) return std::nullopt;
    SymmetricAddressMap view = std::forward<Place>(place)(entry->map.view_table(ptr, bytes));
    entry->engine.attach(view, reinterpret_cast<std::uintptr_t>(ptr) - entry->map.allocation_base);
    return view;
  }

  // Every live entry, oldest first: the order to release them in.
  std::vector<Entry*> oldest_first() {
    std::vector<Entry*> entries;
    for (auto& [base, entry] : live_) entries.push_back(&entry);
    std::sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) { return a->number < b->number; });
    return entries;
  }

  std::size_t size() const { return live_.size(); }
  void clear() { live_.clear(); }

 private:
  const Entry* entry_containing(std::string_view who, const void* ptr, std::size_t bytes) const {
    const auto address = reinterpret_cast<std::uintptr_t>(ptr);
    const std::uintptr_t end = address + std::max<std::size_t>(bytes, 1);
    auto after = live_.upper_bound(address);
    if (after != live_.begin()) {
      const Entry& entry = std::prev(after)->second;
      if (entry.map.owns(ptr, bytes)) return &entry;
      if (address < entry.map.allocation_base + std::max<std::size_t>(entry.map.allocation_bytes, 1))
        throw overlap(who, ptr, bytes, entry.map);
    }
    if (after != live_.end() && after->first < end) throw overlap(who, ptr, bytes, after->second.map);
    return nullptr;
  }

  static Error overlap(std::string_view who, const void* ptr, std::size_t bytes, const SymmetricAddressMap& map) {
    return Error(ErrorCode::invalid_argument,
                 detail::format("{} symmetric_address_map: [{}, +{} bytes) overlaps this provider's allocation [{:#x}, "
                                "+{} bytes) but does not lie inside it; describe a range within one allocation",
                                who, ptr, bytes, map.allocation_base, map.allocation_bytes));
  }

  std::map<std::uintptr_t, Entry> live_;  // by base address
  std::uint64_t next_number_ = 1;
};

}  // namespace aperture::detail
