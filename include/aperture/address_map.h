// aperture/address_map.h — the host-side description of one symmetric allocation.
//
// A SymmetricAddressMap is what a provider hands out: the caller's rank, the number of ranks,
// where this rank's copy lives and how long it is, and the table of peer bases. Its invariant,
// checked whenever one is built: the table has world_size entries and
// host_peer_bases()[local_rank] == allocation_base. A peer that cannot be reached by direct
// load/store (another node, no P2P, shmem_ptr returned NULL) has entry 0 and is_direct false.
//
// Copies share the table: a map is cheap to pass around, and its table lives as long as any
// copy of it does.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "aperture/export.h"
#include "aperture/peer_view.h"

namespace aperture {

// Where a table lives for the provider's kernels. Host providers need nothing: the host vector
// serves. GPU providers copy the table into device memory and keep it alive with `owner`.
struct TablePlacement {
  const std::int64_t* device_table = nullptr;  // null: kernels read the host table
  std::shared_ptr<const void> owner;           // released when the last map copy goes
};

struct APERTURE_API SymmetricAddressMap {
  int local_rank = 0;
  int world_size = 0;
  std::uintptr_t allocation_base = 0;  // == host_peer_bases()[local_rank]
  std::size_t allocation_bytes = 0;

  // Builds a map and checks its invariant; throws aperture::Error naming the broken part.
  // `who` names the provider for the messages.
  static SymmetricAddressMap from_table(std::string_view who, int local_rank, std::vector<std::int64_t> peer_bases,
                                        std::size_t allocation_bytes, TablePlacement placement = {});

  // The table in the memory where this provider's kernels run (device memory for GPU providers).
  const std::int64_t* peer_bases() const;
  // The same table, readable on the host.
  std::span<const std::int64_t> host_peer_bases() const;

  bool is_direct(int peer) const;
  bool all_direct() const;
  std::vector<int> indirect_peers() const;

  // True when [p, p + bytes) lies inside this rank's copy of the allocation.
  bool owns(const void* p, std::size_t bytes = 1) const;

  // The kernel-side handle: rank, world size, peer_bases() and the allocation's length (which
  // APERTURE_CHECKED builds hold every access to).
  // With an engine attached (ranks on other nodes), the view carries its channel too.
  PeerView peer_view() const { return PeerView{local_rank, world_size, peer_bases(), allocation_bytes, engine()}; }

  // The engine that reaches this map's indirect peers (aperture/engine_channel.h); empty when
  // none is attached. Every copy of the map shares it. Providers attach it (with `owner`
  // keeping its state alive) when they make the allocation and clear it before they free it.
  EngineChannel engine() const;
  void attach_engine(EngineChannel channel, std::shared_ptr<const void> owner) const;
  std::shared_ptr<const void> engine_owner() const;

  // The host table of the sub-range [ptr, ptr + bytes) of this allocation: every direct entry
  // shifted by ptr's offset. Providers place it where their kernels run to describe a view.
  // Throws aperture::Error when the range is not inside this map.
  std::vector<std::int64_t> view_table(const void* ptr, std::size_t bytes) const;

  bool has_table() const { return static_cast<bool>(table_); }

  // Marks the allocation as freed, for this map and every copy of it (copies share the table):
  // from then on the checked path (checked_translate, view_table) refuses it with an
  // aperture::Error instead of translating into released memory. Providers call it in free().
  void mark_freed() const;
  bool freed() const;

 private:
  struct Table {
    std::vector<std::int64_t> host;
    TablePlacement placement;
    mutable std::atomic<bool> freed{false};
    mutable EngineChannel engine{};
    mutable std::shared_ptr<const void> engine_owner;
  };
  std::shared_ptr<const Table> table_;
};

// The host-side checked path: to_rank's copy of [ptr, ptr + count) when the rank is in range,
// the peer is direct and the whole range lies inside the map; aperture::Error otherwise.
template <class T>
T* checked_translate(const SymmetricAddressMap& map, T* ptr, int to_rank, std::size_t count = 1);

namespace detail {
APERTURE_API void check_translation_against_map(const SymmetricAddressMap& map, const void* ptr, std::size_t bytes,
                                                int to_rank);
APERTURE_API void check_translation_against_map(const SymmetricAddressMap& map, const void* ptr, std::size_t count,
                                                std::size_t element_bytes, int to_rank);
}

template <class T>
T* checked_translate(const SymmetricAddressMap& map, T* ptr, int to_rank, std::size_t count) {
  // count and the element size go in apart: their product could wrap and pass the range check.
  detail::check_translation_against_map(map, static_cast<const void*>(ptr), count, sizeof(T), to_rank);
  return aperture::translate(ptr, map.local_rank, to_rank, map.host_peer_bases().data());
}

// One symmetric allocation: this rank's pointer, its length, and the map describing it.
struct Allocation {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  SymmetricAddressMap map;

  template <class T>
  T* as() const { return static_cast<T*>(ptr); }
};

}  // namespace aperture
