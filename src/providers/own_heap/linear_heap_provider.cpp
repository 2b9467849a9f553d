#include "providers/own_heap/linear_heap_provider.h"

#include <algorithm>

#include "aperture/error.h"
#include "common/format.h"
#include "providers/registry.h"

namespace aperture::detail {

LinearHeapProvider::LinearHeapProvider(Team& team, HeapNames names, std::size_t capacity)
    : team_(team), heap_(capacity), names_(names) {}

Allocation LinearHeapProvider::allocate(std::size_t bytes, std::size_t alignment) {
  // Compared before anything is refused: a rank with a bad request must fail every rank, not
  // leave the others waiting in the comparison until the timeout. From here on every rank has
  // the same request and the same heap, so every rank decides alike.
  team_.check_same(detail::format("{} allocate", names_.who), {{"bytes", bytes}, {"alignment", alignment}});
  check_allocation_request(names_.who, bytes, alignment);
  if (alignment > max_alignment())
    throw Error(ErrorCode::invalid_argument,
                detail::format("{} allocate: alignment {} exceeds the largest every rank's {} supports ({} bytes); "
                               "pass at most that",
                               names_.who, alignment, names_.heap, max_alignment()));
  const auto offset = heap_.allocate(bytes, alignment);
  if (!offset)
    throw Error(ErrorCode::out_of_memory,
                detail::format("{} allocate: the {} has {}; free allocations or raise {}", names_.who, names_.heap,
                               heap_.describe_no_room(bytes, alignment), names_.size_variable));
  try {
    make_room(*offset, bytes);
  } catch (...) {
    heap_.free(*offset);  // on every rank alike: make_room fails on all of them together
    throw;
  }
  Allocation allocation;
  allocation.ptr = reinterpret_cast<void*>(own_base() + *offset);
  allocation.bytes = bytes;
  // Should placing the table fail here, the block stays reserved (until the provider goes) so
  // that this rank's heap keeps the same layout as its peers', whose allocate succeeded; the
  // next collective call with this allocation then reports the mismatch.
  allocation.map = map_for(*offset, bytes);
  return allocation;
}

void LinearHeapProvider::free(Allocation& allocation) {
  // Judged here, then compared: a rank freeing something else (or twice) fails every rank
  // instead of leaving them waiting.
  std::size_t offset = 0;
  const std::string local_error = free_error(allocation, offset);
  constexpr std::uint64_t kInvalid = ~std::uint64_t{0};
  try {
    team_.check_same(detail::format("{} free", names_.who),
                     {{"offset", local_error.empty() ? offset : kInvalid}, {"bytes", allocation.bytes}});
  } catch (const Error& mismatch) {
    if (local_error.empty()) throw;
    throw Error(ErrorCode::invalid_argument, local_error + "\n" + std::string(mismatch.detail()));
  }
  if (!local_error.empty()) throw Error(ErrorCode::invalid_argument, local_error);
  heap_.free(offset);
  allocation.map.mark_freed();  // every copy of this allocation's map now refuses the checked path
  allocation = Allocation{};
}

std::string LinearHeapProvider::free_error(const Allocation& allocation, std::size_t& offset) const {
  try {
    offset = offset_of(allocation.ptr, "free");
  } catch (const Error& e) {
    return std::string(e.detail());
  }
  // A copy of an Allocation freed before, even if its address was reused since.
  if (allocation.map.freed())
    return detail::format("{} free: the allocation at {} was already freed (through a copy of this Allocation); it "
                          "would be freed twice: free each allocation once",
                          names_.who, allocation.ptr);
  const auto block = heap_.find(offset, 0);
  if (!block || block->first != offset)
    return detail::format("{} free: {} is not a live allocation of this {} (freed twice, or a pointer into the middle "
                          "of an allocation?)",
                          names_.who, allocation.ptr, names_.heap);
  return {};
}

SymmetricAddressMap LinearHeapProvider::symmetric_address_map(const void* ptr, std::size_t bytes) const {
  const std::size_t offset = offset_of(ptr, "symmetric_address_map");
  if (!heap_.find(offset, bytes))
    throw Error(ErrorCode::invalid_argument,
                detail::format("{} symmetric_address_map: [{}, +{} bytes) is not inside a live allocation of this {} "
                               "(freed, or running past the end of its allocation)",
                               names_.who, ptr, bytes, names_.heap));
  return map_for(offset, bytes);
}

std::size_t LinearHeapProvider::offset_of(const void* ptr, const char* call) const {
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  const std::uintptr_t base = own_base();
  const std::size_t mapped = mapped_bytes();
  if (ptr == nullptr || base == 0 || address < base || address - base >= mapped)
    throw Error(ErrorCode::invalid_argument,
                detail::format("{} {}: {} is not memory of this {} provider's {} [{:#x}, +{} bytes); was it allocated "
                               "by another provider?",
                               names_.who, call, ptr, names_.who, names_.heap, base, mapped));
  return address - base;
}

SymmetricAddressMap LinearHeapProvider::map_for(std::size_t offset, std::size_t bytes) const {
  std::vector<std::int64_t> table(bases_);
  for (auto& base : table)
    if (base != 0) base += static_cast<std::int64_t>(offset);
  SymmetricAddressMap map = place_table(std::move(table), bytes);
  engine_.attach(map, offset);
  return map;
}

}  // namespace aperture::detail
