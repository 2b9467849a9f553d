// src/bulk/bulk.cpp — aperture/bulk.h: the checks and the host-side translation every bulk
// transfer shares, and the host-memory path. The GPU side (copy engine or SM copy kernel on a
// stream) is bulk_device.cu.
#include "aperture/bulk.h"

#include <cstring>
#include <limits>
#include <string>

#include "aperture/error.h"
#include "aperture/translate.h"
#include "bulk/bulk_device.h"
#include "common/format.h"

namespace aperture {
namespace {

// Refuses, naming `call` and the values, anything the translation of [ptr, ptr + bytes) to
// `rank`'s copy cannot do: an empty or freed map, a rank out of range, an indirect peer, a range
// outside the allocation. `what` names the argument ("dst").
void check_peer_side(const char* call, const SymmetricAddressMap& map, const void* ptr, std::size_t bytes, int rank,
                     const char* what) {
  if (!map.has_table())
    throw Error(ErrorCode::invalid_argument,
                detail::format("{}: the map is empty (default-constructed or moved from); pass the map of the "
                               "allocation {} lies in",
                               call, what));
  if (map.freed())
    throw Error(ErrorCode::invalid_argument,
                detail::format("{}: {} = {} is in an allocation [{:#x}, +{} bytes) that was freed on rank {} (use "
                               "after free); allocate again",
                               call, what, ptr, map.allocation_base, map.allocation_bytes, map.local_rank));
  if (rank < 0 || rank >= map.world_size)
    throw Error(ErrorCode::invalid_argument, detail::format("{}: rank {} is out of range; this map has ranks 0..{}",
                                                            call, rank, map.world_size - 1));
  if (!map.is_direct(rank)) {
    if (map.engine().attached())
      throw Error(ErrorCode::invalid_argument,
                  detail::format("{}: rank {} is not directly addressable from rank {} (another node: its table "
                                 "entry is 0); bulk transfers to indirect peers are not supported, even with the "
                                 "map's engine channel attached: move the data with PeerView::put/get in a kernel "
                                 "(which goes through the engine), or with the provider's own transfer calls",
                                 call, rank, map.local_rank));
    throw Error(ErrorCode::invalid_argument,
                detail::format("{}: rank {} is not directly addressable from rank {} (its table entry is 0: another "
                               "node, no peer access, or the provider returned no pointer); bulk transfers need a "
                               "direct peer",
                               call, rank, map.local_rank));
  }
  if (!map.owns(ptr, bytes))
    throw Error(ErrorCode::invalid_argument,
                detail::format("{}: {} [{}, +{} bytes) is not inside this allocation [{:#x}, +{} bytes) on rank {}; "
                               "give a range of the allocation the map describes, in this rank's address space",
                               call, what, ptr, bytes, map.allocation_base, map.allocation_bytes, map.local_rank));
}

// The side of put and get that is not in the map: any memory, but not null when there are bytes.
void check_local_side(const char* call, const void* ptr, std::size_t bytes, const char* what) {
  if (ptr == nullptr && bytes != 0)
    throw Error(ErrorCode::invalid_argument,
                detail::format("{}: {} is null with {} bytes to move; pass the local buffer", call, what, bytes));
}

// A GPU provider places its table in device memory (TablePlacement); a host provider's kernels
// read the host table itself.
bool table_on_device(const SymmetricAddressMap& map) { return map.peer_bases() != map.host_peer_bases().data(); }

void check_options(const char* call, const BulkOptions& options) {
  if (options.path != BulkPath::automatic && options.path != BulkPath::copy_engine &&
      options.path != BulkPath::sm_copy)
    throw Error(ErrorCode::invalid_argument,
                detail::format("{}: BulkOptions::path {} is not a BulkPath; use automatic, copy_engine or sm_copy",
                               call, static_cast<int>(options.path)));
}

// Both pointers translated: a memcpy for host memory (now, on this thread), else the GPU side.
void transfer(const char* call, const SymmetricAddressMap& map, void* dst, const void* src, std::size_t bytes,
              BulkStream stream, const BulkOptions& options, bool to_self) {
  if (bytes == 0) return;
  if (!table_on_device(map)) {
    if (stream != nullptr)
      throw Error(ErrorCode::invalid_argument,
                  detail::format("{}: this map is of host memory (a host provider's), whose bulk transfer is a "
                                 "memcpy done before the call returns; stream {} cannot order it: pass no stream",
                                 call, stream));
    std::memcpy(dst, src, bytes);
    return;
  }
  detail::bulk_device_transfer(dst, src, bytes, bulk_path_for(bytes, options, to_self), stream, call);
}

template <class T>
T* to_peer(T* ptr, int rank, const SymmetricAddressMap& map) {
  return aperture::translate(ptr, map.local_rank, rank, map.host_peer_bases().data());
}

}  // namespace

namespace detail {
std::size_t bulk_bytes(std::size_t count, std::size_t element_bytes) {
  if (element_bytes != 0 && count > std::numeric_limits<std::size_t>::max() / element_bytes)
    throw Error(ErrorCode::invalid_argument,
                detail::format("bulk transfer: {} elements of {} bytes is more than the address space holds; check "
                               "the count",
                               count, element_bytes));
  return count * element_bytes;
}
}  // namespace detail

void bulk_put_bytes(void* dst, const void* src, std::size_t bytes, int to_rank, const SymmetricAddressMap& map,
                    BulkStream stream, const BulkOptions& options) {
  check_options("bulk_put", options);
  check_peer_side("bulk_put", map, dst, bytes, to_rank, "dst");
  check_local_side("bulk_put", src, bytes, "src");
  transfer("bulk_put", map, to_peer(dst, to_rank, map), src, bytes, stream, options, to_rank == map.local_rank);
}

void bulk_get_bytes(void* dst, const void* src, std::size_t bytes, int from_rank, const SymmetricAddressMap& map,
                    BulkStream stream, const BulkOptions& options) {
  check_options("bulk_get", options);
  check_peer_side("bulk_get", map, src, bytes, from_rank, "src");
  check_local_side("bulk_get", dst, bytes, "dst");
  transfer("bulk_get", map, dst, to_peer(src, from_rank, map), bytes, stream, options, from_rank == map.local_rank);
}

void bulk_copy_bytes(void* dst, const void* src, std::size_t bytes, int src_rank, int dst_rank,
                     const SymmetricAddressMap& map, BulkStream stream, const BulkOptions& options) {
  check_options("bulk_copy", options);
  check_peer_side("bulk_copy", map, src, bytes, src_rank, "src");
  check_peer_side("bulk_copy", map, dst, bytes, dst_rank, "dst");
  transfer("bulk_copy", map, to_peer(dst, dst_rank, map), to_peer(src, src_rank, map), bytes, stream, options,
           src_rank == map.local_rank && dst_rank == map.local_rank);
}

}  // namespace aperture
