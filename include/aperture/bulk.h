// aperture/bulk.h — large transfers started from the host, ordered on a CUDA stream.
//
// put/get/copy of aperture/rma.h are device operations: a kernel's threads move the bytes. For a
// large transfer the host wants to start between kernels, these enqueue it on `stream` and
// return; it runs after what the stream holds before it and before what follows, with no host
// synchronisation, and it can be captured into a CUDA graph. The rank roles are rma.h's:
//
//     bulk_put(dst, src, count, to_rank, map, stream)   local src -> to_rank's copy of dst
//     bulk_get(dst, src, count, from_rank, map, stream) from_rank's copy of src -> local dst
//     bulk_copy(dst, src, count, src_rank, dst_rank, map, stream)
//
// `map` describes the symmetric allocation: the side that lives on a peer (put's dst, get's src,
// both of copy's) must lie inside this rank's copy of it, and is translated on the host with the
// map's host table. The other side of put and get is any memory the stream's device can reach.
//
// How the bytes move (BulkOptions::path): automatic takes the copy engine (cudaMemcpyAsync on the
// translated pointer) from BulkOptions::copy_engine_min_bytes on, and below that, to a peer, an SM
// copy kernel (16-byte accesses where both pointers allow, a grid sized to the bytes); a transfer
// within the caller's own copy takes the copy engine at every size (aperture/detail/bulk_tuning.h
// says what was measured and what is still reasoned). copy_engine and sm_copy force one, for
// benchmarks and for callers who keep the SMs or the copy engines free.
//
// Refused, with an aperture::Error (invalid_argument) naming the values: a rank out of range; a
// peer that is not directly addressable (table entry 0; with an engine channel attached too: bulk
// transfers to peers on other nodes are not supported, use PeerView's put/get in a kernel);
// a range outside the allocation; a null local side; a freed or empty map. A count of 0 enqueues
// nothing. As for cudaMemcpyAsync, the two ranges must not overlap, and the stream belongs to the
// current device.
//
// Memory of a host provider (shm, mpi-window, openshmem: the map's table is not in device
// memory): a plain memcpy, done before the call returns; `stream` must then be null, since there
// is no stream to order it on. A build without CUDA serves host maps this way and refuses GPU
// ones (unavailable).
//
//     aperture::bulk_put(buf, local, n, peer, alloc.map, stream);  // then a kernel on `stream`
//     notify<<<1, 1, 0, stream>>>(alloc.map.peer_view(), flag, peer);  // signals after the put
//
// Seeing the data on the peer still needs the usual ordering: a signal (enqueued after the put on
// the same stream) that the peer waits for, or a barrier.
#pragma once

#include <cstddef>
#include <cstdint>

#include "aperture/address_map.h"
#include "aperture/detail/bulk_tuning.h"
#include "aperture/export.h"

namespace aperture {

using BulkStream = void*;  // a cudaStream_t; null is the default stream

enum class BulkPath {
  automatic,    // copy engine from copy_engine_min_bytes, SM copy below
  copy_engine,  // cudaMemcpyAsync on the translated pointer
  sm_copy,      // aperture's copy kernel on the stream
};

struct BulkOptions {
  BulkPath path = BulkPath::automatic;
  // automatic: the copy engine from this many bytes on.
  std::size_t copy_engine_min_bytes = detail::kBulkCopyEngineMinBytes;
};

// Byte forms.
APERTURE_API void bulk_put_bytes(void* dst, const void* src, std::size_t bytes, int to_rank,
                                 const SymmetricAddressMap& map, BulkStream stream = nullptr,
                                 const BulkOptions& options = {});
APERTURE_API void bulk_get_bytes(void* dst, const void* src, std::size_t bytes, int from_rank,
                                 const SymmetricAddressMap& map, BulkStream stream = nullptr,
                                 const BulkOptions& options = {});
APERTURE_API void bulk_copy_bytes(void* dst, const void* src, std::size_t bytes, int src_rank, int dst_rank,
                                  const SymmetricAddressMap& map, BulkStream stream = nullptr,
                                  const BulkOptions& options = {});

// The path `options` takes for `bytes` (what the calls above do; for tests and benchmarks).
// `to_self`: the transfer stays in the caller's own copy (put/get with the caller's own rank,
// copy with both ranks the caller): a local device-to-device copy, where the copy engine was
// measured as fast as or faster than the SM copy at every size, so automatic takes it always.
constexpr BulkPath bulk_path_for(std::size_t bytes, const BulkOptions& options = {}, bool to_self = false) {
  if (options.path != BulkPath::automatic) return options.path;
  return to_self || bytes >= options.copy_engine_min_bytes ? BulkPath::copy_engine : BulkPath::sm_copy;
}

namespace detail {
// count x sizeof(T) in bytes, refusing a product that wraps (it would pass the range check).
APERTURE_API std::size_t bulk_bytes(std::size_t count, std::size_t element_bytes);
}  // namespace detail

// Element forms: count elements of T.
template <class T>
void bulk_put(T* dst, const T* src, std::size_t count, int to_rank, const SymmetricAddressMap& map,
              BulkStream stream = nullptr, const BulkOptions& options = {}) {
  bulk_put_bytes(dst, src, detail::bulk_bytes(count, sizeof(T)), to_rank, map, stream, options);
}
template <class T>
void bulk_get(T* dst, const T* src, std::size_t count, int from_rank, const SymmetricAddressMap& map,
              BulkStream stream = nullptr, const BulkOptions& options = {}) {
  bulk_get_bytes(dst, src, detail::bulk_bytes(count, sizeof(T)), from_rank, map, stream, options);
}
template <class T>
void bulk_copy(T* dst, const T* src, std::size_t count, int src_rank, int dst_rank, const SymmetricAddressMap& map,
               BulkStream stream = nullptr, const BulkOptions& options = {}) {
  bulk_copy_bytes(dst, src, detail::bulk_bytes(count, sizeof(T)), src_rank, dst_rank, map, stream, options);
}

}  // namespace aperture
