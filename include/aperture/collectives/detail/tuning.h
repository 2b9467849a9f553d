// aperture/collectives/detail/tuning.h — every tuning constant of the collectives, in one table.
//
// Each entry: its value, one line on why, and the section of docs/PERFORMANCE.md whose
// measurements chose it (the figures live there, not here). Change a value only with a new
// measurement in that section. Communicator::Options overrides the ones marked (Options::...).
//
// Sections of docs/PERFORMANCE.md referred to below:
//   [cpu]    #target-cpu-all-reduce-at-4-ranks--05x-mpi_allreduces-time-at--64-kib
//   [cpu-all] #all-operations-2-4-and-8-ranks-ratio-aperture--baseline-full-run-2026-11-30-0551-utc
//   [large]  #large-sizes-128-blocks-and-zero-copy-on-symmetric-inputs-2026-11-30-0821-0830-utc
//   [ll]     #what-the-small-sizes-run-now-the-push-ll-path
//   [gpu]    #collectives-time-us-busbw-gbs-ratio--aperture-time--nccl-time
//   [p2p]    #point-to-point
//   [targets] #targets
//   [zero-copy] #zero-copy-two-shot-all-reduce-and-all-to-all-on-the-cpu-2026-12-01
//   [cpu-broadcast] #cpu-broadcast-on-the-push-path-and-large-cpu-broadcast--all-to-all-2026-12-02
#pragma once

#include <cstddef>
#include <cstdint>

namespace aperture::collectives::tuning {

// --- Host memory (one CPU thread per rank) ---

// Staging half per part (Options::half_bytes): the largest piece one barrier moves; within a
// core's L2. Swept only at 2 ranks, broadcast and all_to_all at 1-4 MiB: 64 KiB the same, 1 MiB
// slower (1.1-1.9x MPI against 0.8-1.4x) [cpu-broadcast].
inline constexpr std::size_t kHostHalfBytes = std::size_t{256} * 1024;
// all_reduce one-shot up to this / ranks, two-shot above (Options::one_shot_max_bytes; per rank
// count: one_shot_max_bytes() below): one-shot reads world x the data, two-shot 2x with one more
// barrier; they cross near 32 KiB at 4 ranks. [cpu]
inline constexpr std::size_t kHostOneShotTotal = std::size_t{128} * 1024;
// Polls of a wait before it yields (detail/backoff.h), when every rank has a core: a signal is
// seen within nanoseconds. Not swept: [cpu] ran with it.
inline constexpr unsigned kHostSpins = 256;
// The same when ranks share cores: the peer waited for runs only once this rank yields, so
// spinning is lost time. [cpu] (the context-switch count there).
inline constexpr unsigned kHostSharedCoreSpins = 16;
// broadcast on the push path up to this many bytes where ranks share cores
// (Options::broadcast_ll_max_bytes; broadcast_ll_max_bytes() below): where the push path stopped
// winning at 4 and 8 ranks on 2 cores. [cpu-broadcast]
inline constexpr std::size_t kHostBroadcastLLMax = 1024;
// Its ring: a root runs up to this many pieces ahead of its slowest peer, so ranks that share a
// core go through many calls per time slice, as MPI's eager messages let them; 2 (a root only
// two calls ahead) was slower than the staged broadcast at 8 ranks on 2 cores (one run). [cpu-broadcast]
inline constexpr std::size_t kHostBroadcastLLDepth = 16;
// Bytes of one ring slot per root: 2 KiB of lines carry 1 KiB, kHostBroadcastLLMax in one piece.
inline constexpr std::size_t kHostBroadcastLLSlotBytes = std::size_t{2} * 1024;
// Bytes the CPU reduction folds per block: every rank's block stays in L1 while folded. Not
// swept: [cpu-all] ran with it.
inline constexpr std::size_t kHostReduceBlockBytes = 8192;

// --- GPU memory (a grid of CUDA blocks per rank) ---

// Blocks a staged collective may use (Options::max_parts): 64 left NVLink short of requests,
// because each block spends part of every piece on its local copy and a barrier. [large]
inline constexpr int kDeviceParts = 128;
// One block per this many bytes moved, up to kDeviceParts: small calls keep few blocks. Not
// swept: [gpu] ran with it.
inline constexpr std::size_t kDeviceBytesPerPart = std::size_t{64} * 1024;
// Threads per block (Options::block_threads) and the kernels' __launch_bounds__: within 64
// registers a thread, so the reductions keep several vectors in flight. [large]
inline constexpr int kDeviceThreads = 512;
// Staging half per block (Options::half_bytes): 2 MiB halves (fewer barriers) were slower. [large]
inline constexpr std::size_t kDeviceHalfBytes = std::size_t{512} * 1024;
// 16-byte vectors a thread keeps in flight per rank in the reduction: 4 for 16-bit types, 2
// for wider ones (more spills at the launch bound's 128 registers). [large]
template <class T>
inline constexpr int kReduceUnroll = sizeof(T) <= 2 ? 4 : 2;
// The same at more than 2 ranks, where world x this many loads are in flight. [large]
inline constexpr int kReduceUnrollAnyWorld = 2;
// Flat-out polls of a barrier's wait before the bounded, backing-off wait: a peer usually
// arrives within microseconds, and the backoff's sleeps would add to every barrier. [gpu]
inline constexpr int kBarrierSpins = 4096;

// --- GPU, the push (LL) path ---

// all_gather, reduce_scatter and all_reduce(automatic) push up to this many bytes of each
// rank's input at the most (Options::ll_max_bytes; per rank count: ll_max_bytes() below): LL
// beat the staged one-shot up to 512 KiB at 2 ranks. [ll]
inline constexpr std::size_t kDeviceLLMax = std::size_t{512} * 1024;
// One block per this many bytes of each rank's input (Options::ll_part_bytes): a line or two
// per thread; 8 KiB a block was slower. [targets]
inline constexpr std::size_t kDeviceLLBytesPerPart = std::size_t{4} * 1024;
// Blocks of the LL path at the most: 128 were no faster than 64. [targets]
inline constexpr int kDeviceLLParts = 64;
// LL slot per part and sender: 16 KiB of lines carry 8 KiB of data, one piece for a block's
// share at the defaults above (larger calls loop in pieces, with a fence between). [ll]
inline constexpr std::size_t kLLSlotBytes = std::size_t{16} * 1024;
// Flat-out polls of an LL line before the receiver starts sleeping between polls, and the
// sleep: a peer's line usually lands within microseconds. [ll]
inline constexpr unsigned kLLSpins = 4096;
inline constexpr unsigned kLLSleepNs = 128;

// --- Which algorithm, at which size, for which rank count ---
//
// The choices the Communicator makes by default (Options override them), as functions of the
// rank count so that every count has one; tests/collectives check that each of 1..8 ranks
// picks a path that runs and gives the right result (CPU in CI; GPU ranks sharing a GPU in
// scripts/gpu-check.sh). Measured: host memory at 2, 4 and 8 ranks [cpu] [cpu-all]; GPUs at 1
// and 2 [gpu] [ll]. 3 to 8 GPUs have never been lent: those entries are reasoned from the 2-GPU
// figures, as follows.
//
// On a GPU the cost that separates the algorithms is one barrier against bytes on NVLink: a
// barrier kernel takes 2.8-3.1 us [targets], and SM loads and stores move 320-350 GB/s per GPU
// [targets], so one barrier costs about what 1 MB on the link does (kDeviceBarrierBytes). With
// NVSwitch each GPU keeps its link rate whatever the number of peers, so at `world` ranks:
//   - LL against staged one-shot: LL puts every byte on the link twice (a flag word per data
//     word), (world - 1) x B more than one-shot per rank, and saves one barrier: LL while
//     (world - 1) x B < kDeviceBarrierBytes. At 2 ranks that gives 1 MB, beyond the 512 KiB
//     the LL slots hold in one piece, which is what was measured (LL won to 512 KiB [ll]).
//   - one-shot against two-shot: one-shot reads (world - 1) x B, two-shot 2 (world - 1) / world
//     x B with one barrier more: one-shot while (world - 1)(world - 2) / world x B is below
//     kDeviceBarrierBytes; at 2 ranks always (measured [gpu]).
// Rounded down to a power of two, so a reader sees the crossover's order, not false precision.
inline constexpr std::size_t kDeviceBarrierBytes = std::size_t{1} << 20;

constexpr std::size_t floor_power_of_two(std::size_t v) {
  std::size_t p = 1;
  while (p <= v / 2) p *= 2;
  return p;
}

// all_reduce(automatic): one-shot up to this many bytes per rank, two-shot above. The form with
// in_map follows the same choice, zero-copy both: its two-shot crosses one barrier per piece and
// copies nothing, where the staged two-shot copies and crosses two, and it was 0.61x-0.78x the
// staged two-shot's time where the table picks two-shot on the host at 4 ranks [zero-copy].
constexpr std::size_t one_shot_max_bytes(bool device, int world) {
  if (world <= 2) return SIZE_MAX;
  if (!device) return kHostOneShotTotal / static_cast<std::size_t>(world);  // [cpu]
  const auto w = static_cast<std::size_t>(world);
  return floor_power_of_two(kDeviceBarrierBytes * w / ((w - 1) * (w - 2)));
}

// all_gather, reduce_scatter, all_reduce(automatic) take the LL path up to this many bytes of
// each rank's input (before the cap of what the LL slots hold in one piece); 0 on the host.
constexpr std::size_t ll_max_bytes(bool device, int world) {
  if (!device) return 0;  // [cpu]: the staged barrier already costs what a round of context switches does
  if (world <= 1) return kDeviceLLMax;
  const std::size_t crossover = floor_power_of_two(kDeviceBarrierBytes / static_cast<std::size_t>(world - 1));
  return crossover < kDeviceLLMax ? crossover : kDeviceLLMax;
}

// broadcast takes the push path (broadcast.h's broadcast_ll) up to this many bytes, the staged
// one above; 0 on a GPU (its LL broadcast slots are not allocated there: the template was never
// run on one). `ranks_share_cores`: the node runs more ranks than it has cores.
//   - Host, ranks sharing cores: measured against the staged broadcast in the same runs (bench
//     op broadcast.staged), 4 and 8 ranks on 2 cores, quiet machine, three runs: the push path
//     is 3-7x faster at 64-256 B (the staged one's barrier is a round of context switches),
//     faster up to 1 KiB, level from 2 KiB [cpu-broadcast].
//   - Host, a core per rank: the staged path, at every size. Measured at 2 ranks on 2 cores in
//     the same runs: staged 0.10-0.24 us at 64 B-1 KiB, push 0.13-1.38 us (a barrier between
//     running ranks is one flag's trip between caches, cheaper than the lines the peer polls,
//     clears and acknowledges one by one). More ranks with a core each: reasoned from that.
constexpr std::size_t broadcast_ll_max_bytes(bool device, int world, bool ranks_share_cores) {
  if (device || world <= 1 || !ranks_share_cores) return 0;
  return kHostBroadcastLLMax;
}

// all_to_all on a symmetric input (the form with in_map) reads it where it lies from this many
// bytes of each rank's input (world x count elements), and takes the staged path below. The
// staged path copies the whole input into staging and crosses one barrier per piece; the
// zero-copy one copies nothing and crosses two barriers per call: one barrier against one copy.
//   - Host: measured, they cross at 32 KiB at 2 and at 4 ranks (zero-copy 1.7-2.2x slower at
//     1-4 KiB, 0.94-0.96x at 32 KiB, 0.22-0.73x from 64 KiB) [zero-copy].
//   - GPU: reasoned (no 2-GPU machine lent since it was built): one barrier costs about what
//     kDeviceBarrierBytes on NVLink do; the staged copy runs at HBM rates, about 4x NVLink's, so
//     the zero-copy path should win from about 4x that. The bench row all_to_all.symmetric
//     measures it.
// A world of 1 has no peer to read: its all_to_all is one copy, either way.
constexpr std::size_t all_to_all_direct_min_bytes(bool device, int world) {
  if (world <= 1) return SIZE_MAX;
  return device ? 4 * kDeviceBarrierBytes : std::size_t{32} * 1024;
}

// broadcast on a symmetric input (the form with in_map) lets peers read root's input where it lies
// from this many bytes, and takes the staged (or push) path below. The staged path copies root's
// input into staging and crosses one barrier per piece; the zero-copy one copies nothing on root
// and crosses two barriers per call: one barrier against one copy, which root alone pays.
//   - Host: measured at 2, 4 and 8 ranks on 2 cores (bench op broadcast.symmetric against the
//     staged broadcast; bench/results/2026-12-07-cpu-2core/broadcast-symmetric): the zero-copy one
//     wins from 8 KiB at 2 ranks (0.89 us against 1.01; between 1 and 4 KiB in another series), from
//     64 KiB at 4 (5.72 us against 7.27; 4.83 against 3.85 at 16 KiB) and from 256 KiB at 8 (23.12 us
//     against 31.15; 13.80 against 11.56 at 64 KiB); where ranks share cores its second barrier is
//     a round of context switches. At 2 ranks 16 KiB, past the crossings of both series.
//   - GPU: reasoned as all_to_all's above (no 2-GPU machine lent since it was built); bench op
//     broadcast.symmetric on GPU memory, bench/gpu-compare.sh's step broadcast-symmetric, measures it.
// A world of 1 copies alone (Communicator) unless root's `out` overlaps its `in`, and then only
// the zero-copy path says so: it runs at every size.
constexpr std::size_t broadcast_direct_min_bytes(bool device, int world) {
  if (world <= 1) return 0;
  if (device) return 4 * kDeviceBarrierBytes;
  return world == 2 ? std::size_t{16} * 1024 : world <= 4 ? std::size_t{64} * 1024 : std::size_t{256} * 1024;
}

// Teams over several nodes (src/collectives/hierarchical.h): all_reduce reduces the whole vector
// within the node and every rank exchanges it with its column (one MPI exchange, two phases) up to
// this many bytes; above, the node reduce-scatters, each rank exchanges its shard (1 / node's
// ranks of the bytes), the node all-gathers (docs/MULTINODE.md) [nodes].
inline constexpr std::size_t kNodesWholeVectorMaxBytes = std::size_t{32} * 1024;

}  // namespace aperture::collectives::tuning
