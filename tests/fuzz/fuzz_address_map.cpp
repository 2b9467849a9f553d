// fuzz_address_map: SymmetricAddressMap built from raw tables, and every host-side check on it.
//
// Input: byte 0 the table size (1..8), byte 1 the local rank (any int8: out of range too), then
// one int64 per entry, the allocation size (uint64), then operations of 18 bytes each: a kind,
// the offset from the local base, a count, and a target rank (int8). Nothing is dereferenced:
// the properties are about which requests are refused and what the accepted ones compute.
//   - from_table accepts a table exactly when the local rank is in it, its entry is non-zero, and
//     every entry is 0 or an address whose copy of the allocation ends within the signed 64-bit
//     address space (both directions: a valid table refused fails too);
//   - checked_translate accepts only a direct rank in range and a range inside the allocation
//     (the element count times the element size, computed without wrapping), and its result is
//     peer_bases[to] + offset;
//   - view_table accepts the same ranges, shifting every non-zero entry by the offset;
//   - owns(p, n) is exactly "p + n lies inside the allocation".
// UndefinedBehaviorSanitizer watches the pointer arithmetic on the way.
#include <cstdint>
#include <climits>
#include <cstring>
#include <vector>

#include "aperture/aperture.h"
#include "fuzz_check.h"

namespace {

struct Reader {
  const std::uint8_t* data;
  std::size_t size;
  template <class T>
  T take() {
    T value{};
    const std::size_t n = size < sizeof(T) ? size : sizeof(T);
    std::memcpy(&value, data, n);
    data += n;
    size -= n;
    return value;
  }
};

// Is [offset, offset + count * element) inside [0, bytes)? Exact, without wrapping.
bool range_inside(std::uint64_t offset, std::uint64_t count, std::uint64_t element, std::uint64_t bytes) {
  const unsigned __int128 end = static_cast<unsigned __int128>(offset) + static_cast<unsigned __int128>(count) * element;
  return offset <= bytes && end <= bytes;
}

template <class T>
void translate_case(const aperture::SymmetricAddressMap& map, std::uint64_t offset, std::uint64_t count, int to_rank) {
  const auto table = map.host_peer_bases();
  T* ptr = reinterpret_cast<T*>(static_cast<std::uintptr_t>(map.allocation_base + offset));
  T* remote = nullptr;
  try {
    remote = aperture::checked_translate(map, ptr, to_rank, count);
  } catch (const aperture::Error&) {
    return;
  }
  FUZZ_CHECK(to_rank >= 0 && to_rank < map.world_size, "accepted to_rank %d of %d", to_rank, map.world_size);
  FUZZ_CHECK(table[to_rank] != 0, "accepted non-direct rank %d", to_rank);
  FUZZ_CHECK(range_inside(offset, count, sizeof(T), map.allocation_bytes),
             "accepted %llu elements of %zu bytes at offset %llu of a %llu-byte allocation",
             static_cast<unsigned long long>(count), sizeof(T), static_cast<unsigned long long>(offset),
             static_cast<unsigned long long>(map.allocation_bytes));
  const std::uint64_t expected = static_cast<std::uint64_t>(table[to_rank]) + offset;
  FUZZ_CHECK(reinterpret_cast<std::uintptr_t>(remote) == expected, "translated to %p, expected %#llx",
             static_cast<void*>(remote), static_cast<unsigned long long>(expected));
}

void view_case(const aperture::SymmetricAddressMap& map, std::uint64_t offset, std::uint64_t bytes) {
  const auto table = map.host_peer_bases();
  const void* ptr = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(map.allocation_base + offset));
  std::vector<std::int64_t> shifted;
  try {
    shifted = map.view_table(ptr, bytes);
  } catch (const aperture::Error&) {
    FUZZ_CHECK(!range_inside(offset, bytes, 1, map.allocation_bytes), "refused a view inside the allocation");
    return;
  }
  FUZZ_CHECK(range_inside(offset, bytes, 1, map.allocation_bytes), "accepted a view outside the allocation");
  FUZZ_CHECK(shifted.size() == table.size(), "view table has %zu entries, not %zu", shifted.size(), table.size());
  for (std::size_t r = 0; r < table.size(); ++r) {
    const std::uint64_t expected = table[r] == 0 ? 0 : static_cast<std::uint64_t>(table[r]) + offset;
    FUZZ_CHECK(static_cast<std::uint64_t>(shifted[r]) == expected, "entry %zu shifted wrongly", r);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in{data, size};
  const int world_size = 1 + in.take<std::uint8_t>() % 8;
  const int local_rank = in.take<std::int8_t>();
  std::vector<std::int64_t> table(static_cast<std::size_t>(world_size));
  for (auto& entry : table) entry = in.take<std::int64_t>();
  const std::uint64_t allocation_bytes = in.take<std::uint64_t>();

  // The contract's rule for a table, written here from it rather than taken from the code.
  constexpr auto kTop = static_cast<std::uint64_t>(INT64_MAX);
  bool valid = local_rank >= 0 && local_rank < world_size && table[static_cast<std::size_t>(local_rank)] != 0;
  for (std::int64_t entry : table)
    valid = valid && entry >= 0 && (entry == 0 || allocation_bytes <= kTop - static_cast<std::uint64_t>(entry));
  aperture::SymmetricAddressMap map;
  try {
    map = aperture::SymmetricAddressMap::from_table("fuzz", local_rank, table, allocation_bytes);
  } catch (const aperture::Error& e) {
    FUZZ_CHECK(!valid, "refused a valid table (local rank %d of %d, %llu bytes): %s", local_rank, world_size,
               static_cast<unsigned long long>(allocation_bytes), e.what());
    return 0;
  }
  FUZZ_CHECK(valid, "accepted an invalid table (local rank %d of %d)", local_rank, world_size);
  FUZZ_CHECK(local_rank >= 0 && local_rank < world_size, "accepted local rank %d of %d", local_rank, world_size);
  FUZZ_CHECK(table[local_rank] != 0, "accepted a zero local entry");
  FUZZ_CHECK(map.allocation_base == static_cast<std::uintptr_t>(table[local_rank]), "allocation_base is not the entry");
  FUZZ_CHECK(map.world_size == world_size && map.local_rank == local_rank, "map shape differs from the table");
  FUZZ_CHECK(map.peer_bases() == map.host_peer_bases().data(), "a host map's kernels must read the host table");
  const auto indirect = map.indirect_peers();
  FUZZ_CHECK(map.all_direct() == indirect.empty(), "all_direct disagrees with indirect_peers");
  for (int r : indirect) FUZZ_CHECK(table[r] == 0 && !map.is_direct(r), "rank %d listed as indirect", r);
  FUZZ_CHECK(!map.is_direct(-1) && !map.is_direct(world_size), "ranks out of range reported direct");

  while (in.size > 0) {
    const std::uint8_t kind = in.take<std::uint8_t>();
    const std::uint64_t offset = in.take<std::uint64_t>();
    const std::uint64_t count = in.take<std::uint64_t>();
    const int to_rank = in.take<std::int8_t>();
    switch (kind % 4) {
      case 0: translate_case<char>(map, offset, count, to_rank); break;
      case 1: translate_case<std::uint64_t>(map, offset, count, to_rank); break;
      case 2: view_case(map, offset, count); break;
      case 3: {
        const void* p = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(map.allocation_base + offset));
        const bool owned = map.owns(p, count);
        const bool inside = map.allocation_base + offset >= map.allocation_base && range_inside(offset, count, 1, map.allocation_bytes);
        FUZZ_CHECK(owned == inside, "owns(base + %llu, %llu) = %d on a %llu-byte allocation",
                   static_cast<unsigned long long>(offset), static_cast<unsigned long long>(count), owned,
                   static_cast<unsigned long long>(map.allocation_bytes));
        break;
      }
    }
  }
  return 0;
}
