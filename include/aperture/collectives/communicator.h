// aperture/collectives/communicator.h — the host side of the collectives.
//
// A Communicator owns one symmetric scratch allocation (flags, epochs and staging; see
// handle.h) from any provider and runs collectives on it:
//
//     aperture::Team team = aperture::Team::from_env();
//     auto provider = aperture::make_provider("shm", team);
//     aperture::Communicator comm(*provider, team);                 // collective
//     comm.all_reduce(in, out, count, aperture::ReduceOp::sum);     // any element type of types.h
//
// Where the provider's memory is on the host, each call runs the algorithm on the calling
// thread and returns when this rank's result is complete. Where it is on a GPU, each call
// launches a kernel on `stream` (a cudaStream_t; null is the default stream) and returns at
// once; the kernels take no host-side state that changes between calls, so they may be
// captured in a CUDA graph and replayed.
//
// User buffers are ordinary memory of the kind the provider serves (host memory, or device
// memory of this rank's GPU): they need not be symmetric; the scratch is. Every call is
// collective: every rank makes the same calls in the same order with the same counts, types,
// operations and roots. Calls are not thread-safe on one Communicator.
//
// The algorithms are the APERTURE_HD templates of aperture/collectives/*.h; a kernel of yours
// can call them directly with a Coop (aperture/coop.h) and collective_view(). The defaults below come
// from the tuning table, aperture/collectives/detail/tuning.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "aperture/collectives/handle.h"
#include "aperture/collectives/types.h"
#include "aperture/export.h"
#include "aperture/provider.h"

namespace aperture {

class Team;
namespace collectives::detail {
class Hierarchy;  // a team over several nodes (src/collectives/hierarchical.h)
}

// one_shot, two_shot: the staged algorithms (copy into staging, barrier, pull); ll: the push
// path (aperture/collectives/detail/ll.h: data and epoch flag stored straight into the peers, no barrier).
enum class AllReduceAlgorithm { automatic, one_shot, two_shot, ll };
constexpr const char* name_of(AllReduceAlgorithm a) {
  return a == AllReduceAlgorithm::one_shot   ? "one-shot"
         : a == AllReduceAlgorithm::two_shot ? "two-shot"
         : a == AllReduceAlgorithm::ll       ? "ll"
                                             : "automatic";
}

using Stream = void*;  // a cudaStream_t for GPU memory; must be null for host memory

class APERTURE_API Communicator {
 public:
  struct Options {
    // Bytes of one staging half per part; 0: 256 KiB on the host, 512 KiB per block on a GPU.
    // The largest piece one barrier moves; at least 256 x world.
    std::size_t half_bytes = 0;
    // Groups (CUDA blocks) per rank a collective may use; 0: 1 on the host, 128 on a GPU (the LL
    // path takes at most 64 of them).
    int max_parts = 0;
    // all_reduce's automatic choice: one-shot up to this many bytes, two-shot above; 0: the
    // tuning table's for this rank count (tuning::one_shot_max_bytes: every size at 2 ranks; at
    // more, 128 KiB / ranks on the host, 1 MiB (3 GPUs) down to 128 KiB (7-8 GPUs) on GPUs).
    // (The LL path, below, comes first.)
    std::size_t one_shot_max_bytes = 0;
    // Threads per CUDA block (GPU only), 32 to 512 (the kernels' launch bound); 0: 512.
    int block_threads = 0;
    // all_gather, reduce_scatter and all_reduce(automatic) take the push path (LL, see
    // aperture/collectives/detail/ll.h) up to this many bytes of each rank's input. Unset: on a GPU
    // the tuning table's for this rank count (tuning::ll_max_bytes: 512 KiB at 1-3 GPUs, 256 KiB
    // at 4-5, 128 KiB at 6-8), or less where the LL path's blocks cannot move it in one piece (8 KiB a block);
    // 0 on the host (where the barrier of the staged path already costs about what a round of
    // context switches does, see docs/PERFORMANCE.md). 0: never (the staged algorithms only);
    // SIZE_MAX: always.
    std::optional<std::size_t> ll_max_bytes;
    // GPU, LL path: a block per this many bytes of each rank's input, up to max_parts; 0: 4 KiB.
    std::size_t ll_part_bytes = 0;
    // all_to_all on a symmetric input (the form with in_map) reads it in place from this many
    // bytes of each rank's input (size() x count elements) and copies it into staging below.
    // Unset: the tuning table's (tuning::all_to_all_direct_min_bytes: 32 KiB on the host, 4 MiB
    // on GPUs); 0: always in place; SIZE_MAX: never.
    std::optional<std::size_t> all_to_all_direct_min_bytes;
    // broadcast on a symmetric input (the form with in_map) lets peers read root's input in place
    // from this many bytes and takes the staged (or push) path below. Unset: the tuning table's
    // (tuning::broadcast_direct_min_bytes: 16 KiB at 2 ranks, 64 KiB at 3-4 and 256 KiB at more
    // on the host, 4 MiB on GPUs, every size at 1 rank); 0: always in place; SIZE_MAX: never.
    std::optional<std::size_t> broadcast_direct_min_bytes;
    // broadcast takes the push path (broadcast.h's broadcast_ll: root stores and returns, peers
    // acknowledge) up to this many bytes, host memory only. Unset: the tuning table's
    // (tuning::broadcast_ll_max_bytes: 1 KiB on the host where ranks share cores, else 0; 0 on a GPU);
    // 0: never; SIZE_MAX: always. Must be 0 or unset on GPU memory.
    std::optional<std::size_t> broadcast_ll_max_bytes;
  };

  // Collective: allocates the scratch from `provider`, zeroes its flags and holds a team barrier.
  // Provider and Team must outlive the Communicator.
  Communicator(Provider& provider, Team& team, Options options);
  Communicator(Provider& provider, Team& team) : Communicator(provider, team, Options{}) {}
  // Collective: frees the scratch (the GPU's queued work is waited for first).
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return handle_.rank; }
  int size() const { return handle_.world_size; }
  MemoryKind memory_kind() const { return kind_; }
  std::string_view provider_name() const;
  // A team across nodes: what the exchange between nodes runs on, "nccl" or "mpi"
  // (APERTURE_COLLECTIVES_BETWEEN_NODES, docs/MULTINODE.md); "" on one node, where none runs.
  std::string_view between_nodes() const;
  const Options& options() const { return options_; }
  // What kernels take (trivially copyable), named as SymmetricAddressMap::peer_view() is.
  const collectives::CollectiveView& collective_view() const { return handle_; }
  // The old name of collective_view(), kept for one release.
  [[deprecated("use Communicator::collective_view()")]] const collectives::CollectiveView& handle() const {
    return handle_;
  }

  void barrier(Stream stream = nullptr);
  // out = root's in (in read on root only; in == out allowed).
  void broadcast(const void* in, void* out, std::size_t count, DataType type, int root, Stream stream = nullptr);
  // out[r * count ...] = rank r's in[0 .. count).
  void all_gather(const void* in, void* out, std::size_t count, DataType type, Stream stream = nullptr);
  // in: size() * count elements; out[i] = reduction of in[rank() * count + i] over ranks.
  void reduce_scatter(const void* in, void* out, std::size_t count, DataType type, ReduceOp op,
                      Stream stream = nullptr);
  // out[i] = reduction of in[i] over ranks.
  void all_reduce(const void* in, void* out, std::size_t count, DataType type, ReduceOp op,
                  AllReduceAlgorithm algorithm = AllReduceAlgorithm::automatic, Stream stream = nullptr);
  // in, out: size() * count elements; out[r * count + i] = rank r's in[rank() * count + i].
  void all_to_all(const void* in, void* out, std::size_t count, DataType type, Stream stream = nullptr);

  // Zero-copy forms, for an input that is itself symmetric: `in` lies in an allocation of any
  // provider whose map is `in_map` (Allocation::map), at the same offset on every rank (or, for
  // all_gather in place, in == out + rank() * count with `out` in that allocation). Peers
  // then read the input where it lies: no copy into staging, and two barriers per call whatever
  // its size (the second keeps a rank from returning, and letting its input be overwritten,
  // while a peer still reads it). The LL path still serves small sizes (broadcast's push path
  // too), and all_to_all's and broadcast's staged paths those below
  // Options::all_to_all_direct_min_bytes and broadcast_direct_min_bytes;
  // all_reduce runs one-shot or two-shot, zero-copy both, as the form without in_map would
  // choose. Where `out` overlaps `in` in a way the zero-copy algorithm cannot take (any overlap,
  // but all_gather and two-shot all_reduce in place), the staged algorithm runs. Every rank must
  // lay out alike (all disjoint, or all the same overlap): the ranks compare their layouts at the
  // call's first barrier, and where they differ the call fails on every rank with an
  // aperture::Error (invalid_argument) naming the ranks; on GPU memory check() raises it.
  // broadcast reads root's `in` only, so root's layout alone counts: in place or apart, as the
  // form without in_map; an `out` overlapping root's `in` otherwise fails the call on every rank
  // the same way, naming root. The offsets are compared at that barrier too (peers are read at
  // the reader's own offset): where a rank's is not rank 0's (broadcast: root's) the call fails
  // on every rank the same way, naming the ranks, before anything moves; where the staged
  // algorithm runs instead (every rank overlapping), offsets do not matter.
  void all_gather(const void* in, const SymmetricAddressMap& in_map, void* out, std::size_t count, DataType type,
                  Stream stream = nullptr);
  void reduce_scatter(const void* in, const SymmetricAddressMap& in_map, void* out, std::size_t count,
                      DataType type, ReduceOp op, Stream stream = nullptr);
  void all_reduce(const void* in, const SymmetricAddressMap& in_map, void* out, std::size_t count, DataType type,
                  ReduceOp op, AllReduceAlgorithm algorithm = AllReduceAlgorithm::automatic, Stream stream = nullptr);
  void all_to_all(const void* in, const SymmetricAddressMap& in_map, void* out, std::size_t count, DataType type,
                  Stream stream = nullptr);
  void broadcast(const void* in, const SymmetricAddressMap& in_map, void* out, std::size_t count, DataType type,
                 int root, Stream stream = nullptr);

  // Typed forms: T is float, double, [u]int8_t, [u]int32_t, [u]int64_t (and __half, __nv_bfloat16,
  // __nv_fp8_e4m3, __nv_fp8_e5m2 under nvcc); the untyped forms take every DataType on any memory.
  template <class T>
  void broadcast(const T* in, T* out, std::size_t count, int root, Stream stream = nullptr) {
    broadcast(static_cast<const void*>(in), static_cast<void*>(out), count, data_type_of_v<T>, root, stream);
  }
  template <class T>
  void all_gather(const T* in, T* out, std::size_t count, Stream stream = nullptr) {
    all_gather(static_cast<const void*>(in), static_cast<void*>(out), count, data_type_of_v<T>, stream);
  }
  template <class T>
  void reduce_scatter(const T* in, T* out, std::size_t count, ReduceOp op, Stream stream = nullptr) {
    reduce_scatter(static_cast<const void*>(in), static_cast<void*>(out), count, data_type_of_v<T>, op, stream);
  }
  template <class T>
  void all_reduce(const T* in, T* out, std::size_t count, ReduceOp op,
                  AllReduceAlgorithm algorithm = AllReduceAlgorithm::automatic, Stream stream = nullptr) {
    all_reduce(static_cast<const void*>(in), static_cast<void*>(out), count, data_type_of_v<T>, op, algorithm,
               stream);
  }
  template <class T>
  void all_to_all(const T* in, T* out, std::size_t count, Stream stream = nullptr) {
    all_to_all(static_cast<const void*>(in), static_cast<void*>(out), count, data_type_of_v<T>, stream);
  }

  // The algorithm all_reduce(automatic) runs for `bytes` bytes per rank.
  AllReduceAlgorithm choose_all_reduce(std::size_t bytes) const;
  std::size_t one_shot_max_bytes() const { return options_.one_shot_max_bytes; }
  // True when all_gather / reduce_scatter / all_reduce(automatic) take the LL path for `bytes`
  // bytes of each rank's input.
  bool uses_ll(std::size_t bytes) const { return ll_max_bytes_ != 0 && bytes <= ll_max_bytes_; }
  // True when a broadcast of `bytes` takes the push path (Options::broadcast_ll_max_bytes).
  bool broadcast_uses_ll(std::size_t bytes) const {
    return broadcast_ll_max_bytes_ != 0 && bytes <= broadcast_ll_max_bytes_;
  }

  // GPU memory: waits for `stream` and throws aperture::Error if a kernel's wait gave up
  // (APERTURE_TIMEOUT) since the Communicator was made. Host memory: nothing to check (host
  // waits throw where they give up).
  void check(Stream stream = nullptr);

 private:
  void check_call(const char* call, std::size_t count, DataType type, bool reduces, Stream stream,
                  std::size_t in_elements, std::size_t out_elements, const void* in, const void* out) const;
  void check_root(const char* call, int root) const;
  // After a zero-copy call on host memory: throws if the ranks laid out in/out differently, or a
  // broadcast's root overlapped them.
  void check_layouts(const char* call);
  // The input's peer table for a zero-copy call, after checking `in_map` describes `in`.
  const std::int64_t* symmetric_input(const char* call, const SymmetricAddressMap& in_map, const void* in,
                                      std::size_t bytes) const;

  Provider& provider_;
  Team& team_;
  MemoryKind kind_ = MemoryKind::host;
  Options options_;
  Allocation scratch_;
  collectives::CollectiveHandle handle_;
  collectives::CollectiveHandle call_handle_;  // handle_ with ll_ends_kernel: what the library's own calls run on
  unsigned host_spins_ = 0;       // CoopHost::spins: fewer when this machine runs more ranks than cores
  int ll_parts_ = 1;              // the LL path's blocks at the most
  std::size_t ll_max_bytes_ = 0;  // options_.ll_max_bytes resolved
  std::size_t all_to_all_direct_min_bytes_ = 0;  // tuning::all_to_all_direct_min_bytes for this team
  std::size_t broadcast_direct_min_bytes_ = 0;   // tuning::broadcast_direct_min_bytes for this team
  std::size_t broadcast_ll_max_bytes_ = 0;  // options_.broadcast_ll_max_bytes resolved
  // Set when the team spans nodes: every call then runs the hierarchical algorithms.
  std::unique_ptr<collectives::detail::Hierarchy> hierarchy_;
};

}  // namespace aperture
