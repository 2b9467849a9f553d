#include "aperture/address_map.h"

#include <limits>
#include <string>

#include "aperture/error.h"
#include "common/format.h"

namespace aperture {

SymmetricAddressMap SymmetricAddressMap::from_table(std::string_view who, int local_rank,
                                                    std::vector<std::int64_t> peer_bases,
                                                    std::size_t allocation_bytes, TablePlacement placement) {
  if (peer_bases.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw Error(ErrorCode::invalid_argument,
                detail::format("{}: a table of {} entries is larger than any world", who, peer_bases.size()));
  const int world_size = static_cast<int>(peer_bases.size());
  if (world_size == 0)
    throw Error(ErrorCode::invalid_argument,
                detail::format("{}: empty peer table; a provider must give one entry per rank", who));
  if (local_rank < 0 || local_rank >= world_size)
    throw Error(ErrorCode::invalid_argument,
                detail::format("{}: local_rank {} is outside the table of {} ranks", who, local_rank, world_size));
  if (peer_bases[local_rank] == 0)
    throw Error(ErrorCode::invalid_argument,
                detail::format("{}: the table's entry for the local rank {} is 0; it must be the allocation base", who,
                               local_rank));
  // Every copy must lie inside the address space as translate() computes it (signed 64-bit
  // base + offset): a negative entry, or one whose copy runs past 2^63, would make the
  // translation of an in-range pointer overflow.
  const auto limit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  for (int r = 0; r < world_size; ++r)
    if (peer_bases[r] < 0 || (peer_bases[r] != 0 && allocation_bytes > limit - static_cast<std::uint64_t>(peer_bases[r])))
      throw Error(
          ErrorCode::invalid_argument,
          detail::format("{}: the table's entry for rank {} ({:#x}) with an allocation of {} bytes is not a range "
                         "of this process's address space; a table holds addresses (or 0 for a peer that is "
                         "not directly addressable)",
                         who, r, static_cast<std::uint64_t>(peer_bases[r]), allocation_bytes));
  SymmetricAddressMap map;
  map.local_rank = local_rank;
  map.world_size = world_size;
  map.allocation_base = static_cast<std::uintptr_t>(peer_bases[local_rank]);
  map.allocation_bytes = allocation_bytes;
  auto table = std::make_shared<Table>();
  table->host = std::move(peer_bases);
  table->placement = std::move(placement);
  map.table_ = std::move(table);
  return map;
}

const std::int64_t* SymmetricAddressMap::peer_bases() const {
  if (!table_) return nullptr;
  return table_->placement.device_table != nullptr ? table_->placement.device_table : table_->host.data();
}

std::span<const std::int64_t> SymmetricAddressMap::host_peer_bases() const {
  if (!table_) return {};
  return table_->host;
}

void SymmetricAddressMap::mark_freed() const {
  if (table_) table_->freed.store(true, std::memory_order_relaxed);
}

EngineChannel SymmetricAddressMap::engine() const { return table_ ? table_->engine : EngineChannel{}; }

void SymmetricAddressMap::attach_engine(EngineChannel channel, std::shared_ptr<const void> owner) const {
  if (!table_)
    throw Error(ErrorCode::invalid_argument,
                "attach_engine: this map has no table; build it with SymmetricAddressMap::from_table first");
  table_->engine = channel;
  table_->engine_owner = std::move(owner);
}

std::shared_ptr<const void> SymmetricAddressMap::engine_owner() const {
  return table_ ? table_->engine_owner : nullptr;
}

bool SymmetricAddressMap::freed() const { return table_ && table_->freed.load(std::memory_order_relaxed); }

bool SymmetricAddressMap::is_direct(int peer) const {
  return table_ && peer >= 0 && peer < world_size && table_->host[peer] != 0;
}

bool SymmetricAddressMap::all_direct() const { return indirect_peers().empty() && table_; }

std::vector<int> SymmetricAddressMap::indirect_peers() const {
  std::vector<int> peers;
  for (int r = 0; r < world_size; ++r)
    if (!is_direct(r)) peers.push_back(r);
  return peers;
}

bool SymmetricAddressMap::owns(const void* p, std::size_t bytes) const {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  if (!table_ || address < allocation_base) return false;
  const std::uintptr_t offset = address - allocation_base;
  return offset <= allocation_bytes && bytes <= allocation_bytes - offset;
}

std::vector<std::int64_t> SymmetricAddressMap::view_table(const void* ptr, std::size_t bytes) const {
  if (freed())
    throw Error(ErrorCode::invalid_argument,
                detail::format("view [{}, +{} bytes): the allocation [{:#x}, +{} bytes) was freed (use after free)",
                               ptr, bytes, allocation_base, allocation_bytes));
  if (!owns(ptr, bytes))
    throw Error(
        ErrorCode::invalid_argument,
        detail::format(
            "view [{}, +{} bytes) is not inside this allocation [{:#x}, +{} bytes) on rank {}; describe a range that "
            "lies within the allocation",
            ptr, bytes, allocation_base, allocation_bytes, local_rank));
  const auto offset = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(ptr) - allocation_base);
  std::vector<std::int64_t> shifted(table_->host);
  for (auto& base : shifted)
    if (base != 0) base += offset;
  return shifted;
}

namespace detail {

void check_translation_against_map(const SymmetricAddressMap& map, const void* ptr, std::size_t count,
                                   std::size_t element_bytes, int to_rank) {
  if (element_bytes != 0 && count > std::numeric_limits<std::size_t>::max() / element_bytes)
    throw Error(
        ErrorCode::invalid_argument,
        detail::format("checked_translate: {} elements of {} bytes is more than the address space holds; check the "
                       "count",
                       count, element_bytes));
  check_translation_against_map(map, ptr, count * element_bytes, to_rank);
}

void check_translation_against_map(const SymmetricAddressMap& map, const void* ptr, std::size_t bytes, int to_rank) {
  if (!map.has_table())
    throw Error(ErrorCode::invalid_argument, "checked_translate: the map is empty (default-constructed or moved from)");
  if (map.freed())
    throw Error(
        ErrorCode::invalid_argument,
        detail::format("checked_translate: [{}, +{} bytes) is in an allocation [{:#x}, +{} bytes) that was freed on "
                       "rank {} (use after free); allocate again, and drop copies of an Allocation once it is freed",
                       ptr, bytes, map.allocation_base, map.allocation_bytes, map.local_rank));
  if (to_rank < 0 || to_rank >= map.world_size)
    throw Error(ErrorCode::invalid_argument,
                detail::format("checked_translate: to_rank {} is out of range; this map has ranks 0..{}", to_rank,
                               map.world_size - 1));
  if (!map.is_direct(to_rank))
    throw Error(
        ErrorCode::invalid_argument,
        detail::format("checked_translate: rank {} is not directly addressable from rank {} (its table entry is 0: "
                       "another node, no peer access, or the provider returned no pointer); reach it through the "
                       "provider's own transfer engine instead",
                       to_rank, map.local_rank));
  if (!map.owns(ptr, bytes))
    throw Error(
        ErrorCode::invalid_argument,
        detail::format("checked_translate: [{}, +{} bytes) is not inside this allocation [{:#x}, +{} bytes) on rank "
                       "{}; translate only pointers into the allocation the map describes",
                       ptr, bytes, map.allocation_base, map.allocation_bytes, map.local_rank));
}

}  // namespace detail
}  // namespace aperture
