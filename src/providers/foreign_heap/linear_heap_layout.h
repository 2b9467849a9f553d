// src/providers/foreign_heap/linear_heap_layout.h — where a foreign symmetric heap (OpenSHMEM's, NVSHMEM's)
// maps each peer's copy, learnt and checked at start-up, and the tables that follow for every
// allocation in it.
//
// The library's pointer query (shmem_ptr, nvshmem_ptr) says where a peer's copy of an address is
// mapped in this process, or NULL. When the library maps each peer's whole heap as one range,
// the distance to a peer's copy is the same for every allocation and one table serves all of
// them: the heap is linear. That is checked, not assumed: the distances are learnt from one
// allocation and a second one, translated with them, must be where the query says it is. The
// last proof, a store through that table arriving in the peer's own copy, is each provider's
// (host stores for OpenSHMEM, device copies for NVSHMEM).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "aperture/team.h"

namespace aperture::detail {

class LinearHeapLayout {
 public:
  // Where `pe`'s copy of `ptr` is mapped here, or nullptr.
  using PeerPointer = void* (*)(const void* ptr, int pe);
  // The library's collective allocation and free (shmem_malloc / shmem_free, ...).
  using Malloc = void* (*)(std::size_t bytes);
  using Free = void (*)(void* ptr);
  // Stores rank me's stamp into every direct peer's copy of a probe through `table` and checks
  // what arrived in its own copy `probe` (world size * 8 bytes). Returns "" or what went wrong.
  using ProveStores = std::function<std::string(void* probe, const std::vector<std::int64_t>& table)>;

  // `who` names the provider and `query` the pointer query in messages.
  LinearHeapLayout(std::string_view who, std::string_view query, PeerPointer peer_pointer)
      : who_(who), query_(query), peer_pointer_(peer_pointer) {}

  // Collective. Allocates two buffers A and B, learns each peer's distance from A, checks that
  // B translated with them is where the pointer query says B is, and has `prove_stores` store
  // through B's table; every rank throws aperture::Error together when any step fails.
  void learn_and_verify(Team& team, Malloc malloc, Free free, const ProveStores& prove_stores);

  // The table of an address in the heap.
  std::vector<std::int64_t> table_of(const void* ptr) const;

  // The table of [ptr, ptr + bytes) from the pointer query alone, range end included, for
  // symmetric memory the program got from the library itself. Throws aperture::Error when a
  // peer's copy of the range is not in one piece.
  std::vector<std::int64_t> table_of_foreign_range(const void* ptr, std::size_t bytes) const;

  // The local part of learn_and_verify: learns from `a`, checks on `b`. Returns "" or what is
  // wrong; `table_b` is b's table (0 where not direct).
  std::string learn(int me, int n, const void* a, const void* b, std::vector<std::int64_t>& table_b);

 private:

  std::string who_;
  std::string query_;
  PeerPointer peer_pointer_;
  std::vector<bool> direct_;         // the query reaches the peer's heap
  std::vector<std::int64_t> delta_;  // where a peer's copy is, minus where ours is (direct peers)
};

}  // namespace aperture::detail
