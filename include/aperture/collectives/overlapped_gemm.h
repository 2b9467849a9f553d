// aperture/collectives/overlapped_gemm.h — the two GEMMs of a tensor-parallel layer with their
// communication overlapped: all-gather then GEMM, and GEMM then reduce-scatter.
//
//     aperture::OverlappedGemm tp(*provider, team);                 // collective
//     tp.ag_gemm(a_shard, b, c, m, n, k, stream);   // C[m x n]     = all_gather(A_shard[m/W x k]) @ B[k x n]
//     tp.gemm_rs(a, b, c_shard, m, n, k, stream);   // C_shard[m/W x n] = reduce_scatter(A[m x k] @ B[k x n])
//
// Every matrix is bfloat16, row-major, dense (leading dimension = columns), in device memory of
// this rank's GPU; it need not be symmetric. Products accumulate in fp32 (cuBLASLt); gemm_rs
// sums the ranks' bf16 partial products in fp32, in rank order (the same on every rank), and
// rounds once. W is the team size; m must be a multiple of W, n and k multiples of 64.
//
// How the communication hides (a chunked schedule of cuBLASLt GEMMs, gated by flags; the
// transfers and flags use only aperture's public operations, so it runs on every GPU provider):
//   ag_gemm  a side stream pushes this rank's shard into every peer's symmetric gather buffer
//            with the copy engine (cudaMemcpyAsync on the translated address) and then raises
//            the peer's arrival flag (aperture::signal). Meanwhile the caller's stream multiplies
//            the local shard, then each peer's shard as its flag rises (a one-thread kernel on
//            aperture::wait_until_ge_for), nearest peer first: the GEMM eats the shards as they land.
//   gemm_rs  the caller's stream multiplies the rows owned by each peer in turn (its own last),
//            and the GEMM's output goes straight into the owner's symmetric receive slot (the
//            translated address is cuBLASLt's D); a flag follows each chunk. The owner waits for
//            every chunk, sums them in fp32 and writes its bf16 shard.
// A buffer is written for call e only once its owner has said it finished reading it for call
// e-1 (a second flag), so calls may follow each other with no host synchronisation. Epochs live
// in device memory: a call may be captured in a CUDA graph and replayed. Device waits give up
// after APERTURE_TIMEOUT; check() reports that.
//
// Across nodes (a team over several nodes where some peer's memory is out of load/store reach;
// docs/MULTINODE.md) both run UNFUSED, with no overlap, on a Communicator's collectives
// (hierarchical: the node's ranks by load/store, the nodes through MPI):
//   ag_gemm  all_gather of the shards into a buffer of A's m x k, then one GEMM of all m rows;
//   gemm_rs  one GEMM of all m rows into an m x n buffer (the bf16 partial product), widened to
//            fp32, reduce_scatter (sum) in fp32, and the shard rounded once to bf16: the same
//            arithmetic as on one node (bf16 partials summed in fp32, rounded once), with the
//            ranks folded node by node (rank order within a node, then node order), and twice
//            the bytes between nodes that a bf16 sum would move (which would round after every add).
// Same shapes, errors and stream order. The constructor then also makes that Communicator
// (collective; its scratch comes from `provider`: 128 MiB + 4 MiB per rank at its defaults),
// and the calls cannot be captured in a CUDA graph (the collective waits for the stream on the
// host and calls MPI): a call while `stream` is capturing throws aperture::Error (unavailable)
// before it queues anything.
//
// Calls are collective (every rank, same order, same shapes) and run on `stream` (the caller's
// current stream; a cudaStream_t). The symmetric buffers grow on a call that needs more (a
// collective allocation from the provider); call reserve() with the largest shapes before
// capturing a graph: growing during a capture is refused with an Error. Not thread-safe.
//
// It lives in aperture::collectives (not the core library) because it needs the CUDA runtime and
// cuBLASLt, which the core library does not bring in; it uses the core API the way the
// collectives do (translate, signal, wait_until_ge_for on a provider's allocation).
#pragma once

#include <cstddef>
#include <memory>

#include "aperture/collectives/communicator.h"  // Stream
#include "aperture/export.h"
#include "aperture/provider.h"

namespace aperture {

class Team;

class APERTURE_API OverlappedGemm {
 public:
  // Collective: allocates the flags from `provider` (which must serve GPU memory) and creates
  // the cuBLASLt handle, a side stream and a 32 MiB workspace. Provider and Team must outlive it.
  OverlappedGemm(Provider& provider, Team& team);
  // Collective: waits for this rank's queued work and frees the symmetric buffers.
  ~OverlappedGemm();
  OverlappedGemm(const OverlappedGemm&) = delete;
  OverlappedGemm& operator=(const OverlappedGemm&) = delete;

  int rank() const;
  int size() const;

  // Collective: makes the symmetric buffers large enough for ag_gemm and gemm_rs of these shapes.
  void reserve(std::size_t m, std::size_t n, std::size_t k);

  // C[m x n] = all_gather(a_shard) @ b: a_shard is this rank's m/W rows of A (rows rank()*m/W
  // onwards of the gathered A), b is k x n, c is m x n (every rank gets all of it).
  void ag_gemm(const void* a_shard, const void* b, void* c, std::size_t m, std::size_t n, std::size_t k,
               Stream stream = nullptr);
  // c_shard[m/W x n] = rows rank()*m/W onwards of the sum over ranks of a[m x k] @ b[k x n].
  void gemm_rs(const void* a, const void* b, void* c_shard, std::size_t m, std::size_t n, std::size_t k,
               Stream stream = nullptr);

  // Waits for `stream` and throws aperture::Error (ErrorCode::timeout) if a device wait of any
  // call so far gave up.
  void check(Stream stream = nullptr);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace aperture
