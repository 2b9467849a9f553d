// aperture/collectives/handle.h — what a kernel or CPU thread needs to run a collective.
//
// A CollectiveHandle is a small trivially-copyable value (pass it to kernels by value), made by
// aperture::Communicator (aperture/collectives/communicator.h) from one symmetric scratch
// allocation of any provider:
//
//   flags    [max_parts][world]  symmetric, one 64-byte line each (senders do not share lines).
//                                flags[p][s] on rank r: the last epoch rank s has announced to
//                                rank r for part p. Signals only ever raise it. Words 1 and 2
//                                of the line: a word rank s handed over with the barrier of an
//                                odd / even epoch (announcement(); the zero-copy forms' layout).
//   epochs   [max_parts]         this rank's own: the last epoch part p has used. Kept in the
//                                memory the collectives run in (device memory on a GPU), so a
//                                kernel captured in a CUDA graph reads the current epoch on every
//                                replay; the host passes nothing that changes between calls.
//   status   kStatusWords words  this rank's own: word 0 is kStatusWaitGaveUp once a device
//                                wait gave up, kStatusLayoutsDiffer once the ranks of a zero-copy
//                                call laid out in/out differently (then words 1.. hold the mask
//                                of the ranks whose `out` overlapped `in`, rank r at bit r % 64
//                                of word 1 + r / 64), kStatusRootOverlaps once a zero-copy
//                                broadcast's root gave an `out` overlapping its `in` other than
//                                in place (word 1: that root), kStatusOffsetsDiffer once the
//                                ranks of a zero-copy call passed their symmetric input at
//                                different offsets in its allocation (words 1..: the mask of the
//                                ranks whose offset is not the reference rank's: rank 0's, a
//                                broadcast's root's).
//   ll       [max_parts][2][world][ll_slot_bytes]  symmetric: what peers push to this rank on
//                                the LL path (aperture/collectives/detail/ll.h); zeroed at construction
//                                and used by nothing else. [p][e & 1][s]: rank s's lines for part
//                                p at epoch e.
//   broadcast_lines [max_parts][depth][world][broadcast_slot_bytes]  symmetric (host memory
//                                only; null on a GPU): the LL broadcast's lines (broadcast.h's
//                                broadcast_ll), as `ll` but on piece numbers of their own and a
//                                ring of broadcast_depth slots instead of two halves.
//                                [p][b % depth][s]: root s's lines of broadcast piece b.
//   broadcast_acks [max_parts][world]  symmetric, one 64-byte line each: broadcast_acks[p][s] on
//                                rank r: the last broadcast piece rooted at r whose lines rank s
//                                has received and cleared. Only ever raised.
//   broadcast_state [max_parts][1 + depth, to whole lines]  this rank's own: word 0 the last
//                                broadcast piece (every rank counts every piece), word 1 + k the
//                                last piece this rank rooted in ring slot k (0: none).
//   staging  [max_parts][2][half_bytes]  symmetric: what peers read from this rank.
//
// Not in the scratch: `cancel`, null (no cancel) unless the library sets it. Where it is set, the
// host raises it (non-zero) once the job has failed, and every device wait of the collectives
// gives up at its next backoff poll, as at its timeout (the host then names the failure instead
// of a timeout). Only the node's phases of a team across nodes get one (a pinned, mapped host
// word of src/collectives/kernel_cancel.h): their kernels may wait for a node peer that has
// already thrown. On one node, and in Communicator::collective_view(), it stays null: a null word
// is tested only between backoff sleeps, never in the polls before them.
//
// The epochs are the "monotonic counters": every barrier raises a part's epoch by one on every
// rank, so no flag is ever reset and the same scratch serves every call, forever.
#pragma once

#include <cstdint>
#include <type_traits>

#include "aperture/config.h"
#include "aperture/peer_view.h"

namespace aperture::collectives {

// Words between two flags: each flag has a cache line of its own, so the ranks announcing to
// one rank do not take the line from each other.
inline constexpr std::uint64_t kFlagStride = 8;

// The status words (CollectiveHandle::status): what went wrong, and the ranks it concerns.
inline constexpr std::uint64_t kStatusWords = 32;
inline constexpr std::uint64_t kStatusWaitGaveUp = 1;
inline constexpr std::uint64_t kStatusLayoutsDiffer = 2;
inline constexpr std::uint64_t kStatusRootOverlaps = 3;
inline constexpr std::uint64_t kStatusOffsetsDiffer = 4;

struct CollectiveHandle {
  int rank = 0;
  int world_size = 0;
  int max_parts = 0;                         // groups (CUDA blocks) per rank a collective may use
  const std::int64_t* peer_bases = nullptr;  // the scratch allocation's table, where the code runs
  std::uint64_t* flags = nullptr;            // [max_parts * world_size] x kFlagStride words, symmetric
  std::uint64_t* epochs = nullptr;           // [max_parts], local
  std::uint64_t* status = nullptr;           // [kStatusWords], local
  unsigned char* staging = nullptr;          // [max_parts][2][half_bytes], symmetric
  std::uint64_t half_bytes = 0;              // a multiple of 256
  unsigned char* ll = nullptr;               // [max_parts][2][world_size][ll_slot_bytes], symmetric
  std::uint64_t ll_slot_bytes = 0;           // a multiple of 256
  unsigned char* broadcast_lines = nullptr;  // [max_parts][broadcast_depth][world_size][broadcast_slot_bytes]; host only
  std::uint64_t* broadcast_acks = nullptr;   // [max_parts * world_size] x kFlagStride words, symmetric; host only
  std::uint64_t* broadcast_state = nullptr;  // [max_parts] x broadcast_state_words(), local; host only
  std::uint64_t broadcast_depth = 0;         // slots in the ring; 0: no push broadcast
  std::uint64_t broadcast_slot_bytes = 0;    // a multiple of 256
  std::uint64_t timeout_ns = 0;              // device waits give up after this long
  // True only in the copy the Communicator's own kernels get, which run one collective each (the
  // kernel boundary then orders an LL call's clears before the next call's lines). False in
  // Communicator::handle(): a kernel of yours may run LL collectives back to back, and each
  // fences after its last piece, as between its pieces (detail/ll.h).
  bool ll_ends_kernel = false;
  // Null: device waits give up only at timeout_ns. Else a word in memory the host may store into
  // while a kernel runs (pinned, mapped): non-zero makes every device wait give up as at its
  // timeout (signal.h's wait_until_ge_for). Host waits ignore it (they ask the job watch).
  const std::uint64_t* cancel = nullptr;

  APERTURE_HD PeerView peers() const { return PeerView{rank, world_size, peer_bases}; }
  // Where rank `sender` announces its epochs to this rank, for part p.
  APERTURE_HD std::uint64_t* flag(int part, int sender) const {
    return flags + (static_cast<std::uint64_t>(part) * static_cast<std::uint64_t>(world_size) +
                    static_cast<std::uint64_t>(sender)) * kFlagStride;
  }
  // Where rank `sender` hands this rank a word with the barrier of `epoch` (words 1 and 2 of
  // its flag line, by the epoch's parity), for part p.
  APERTURE_HD std::uint64_t* announcement(int part, int sender, std::uint64_t epoch) const {
    return flag(part, sender) + 1 + (epoch & 1);
  }
  // The staging half that belongs to `epoch` (data written before the barrier of that epoch and
  // read after it), for part p.
  APERTURE_HD unsigned char* half(int part, std::uint64_t epoch) const {
    return staging + (static_cast<std::uint64_t>(part) * 2 + (epoch & 1)) * half_bytes;
  }
  // Where rank `sender` pushes its LL lines of `epoch` to this rank, for part p.
  APERTURE_HD unsigned char* ll_slot(int part, std::uint64_t epoch, int sender) const {
    return ll + ((static_cast<std::uint64_t>(part) * 2 + (epoch & 1)) * static_cast<std::uint64_t>(world_size) +
                 static_cast<std::uint64_t>(sender)) * ll_slot_bytes;
  }
  // Where root `sender` pushes its lines of broadcast piece `piece` to this rank, for part p.
  APERTURE_HD unsigned char* broadcast_slot(int part, std::uint64_t piece, int sender) const {
    return broadcast_lines +
           ((static_cast<std::uint64_t>(part) * broadcast_depth + piece % broadcast_depth) *
                static_cast<std::uint64_t>(world_size) +
            static_cast<std::uint64_t>(sender)) * broadcast_slot_bytes;
  }
  // Where rank `sender` acknowledges to this rank (a root) the broadcast pieces it cleared, for part p.
  APERTURE_HD std::uint64_t* broadcast_ack(int part, int sender) const {
    return broadcast_acks + (static_cast<std::uint64_t>(part) * static_cast<std::uint64_t>(world_size) +
                             static_cast<std::uint64_t>(sender)) * kFlagStride;
  }
  APERTURE_HD std::uint64_t* broadcast_state_of(int part) const {
    return broadcast_state + static_cast<std::uint64_t>(part) * broadcast_state_words(broadcast_depth);
  }
  APERTURE_HD static constexpr std::uint64_t broadcast_state_words(std::uint64_t depth) {
    return (1 + depth + kFlagStride - 1) / kFlagStride * kFlagStride;
  }
};

static_assert(std::is_trivially_copyable_v<CollectiveHandle>, "a CollectiveHandle is passed to kernels by value");

// The name a kernel's value goes by, as PeerView is for SymmetricAddressMap::peer_view(): what
// Communicator::collective_view() gives. Inside the library the struct is still spelled
// CollectiveHandle; that spelling becomes a deprecated alias of this one in a later change.
using CollectiveView = CollectiveHandle;

// The byte layout of the scratch allocation, shared by the host class and its tests.
struct ScratchLayout {
  std::uint64_t flags_offset = 0;
  std::uint64_t epochs_offset = 0;
  std::uint64_t status_offset = 0;
  std::uint64_t ll_offset = 0;
  std::uint64_t broadcast_lines_offset = 0;  // the broadcast_* regions: empty when broadcast_depth is 0
  std::uint64_t broadcast_acks_offset = 0;
  std::uint64_t broadcast_state_offset = 0;
  std::uint64_t staging_offset = 0;
  std::uint64_t total_bytes = 0;

  static constexpr std::uint64_t round_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }
  static constexpr ScratchLayout make(int world, int max_parts, std::uint64_t half_bytes,
                                      std::uint64_t ll_slot_bytes = 0, std::uint64_t broadcast_depth = 0,
                                      std::uint64_t broadcast_slot_bytes = 0) {
    ScratchLayout l;
    l.flags_offset = 0;
    l.epochs_offset =
        round_up(static_cast<std::uint64_t>(max_parts) * static_cast<std::uint64_t>(world) * kFlagStride * 8, 256);
    l.status_offset = l.epochs_offset + round_up(static_cast<std::uint64_t>(max_parts) * 8, 256);
    l.ll_offset = l.status_offset + kStatusWords * 8;
    const std::uint64_t lines = static_cast<std::uint64_t>(max_parts) * 2 * static_cast<std::uint64_t>(world) * ll_slot_bytes;
    const std::uint64_t parts = broadcast_depth != 0 ? static_cast<std::uint64_t>(max_parts) : 0;
    l.broadcast_lines_offset = l.ll_offset + lines;
    l.broadcast_acks_offset = l.broadcast_lines_offset +
                              parts * broadcast_depth * static_cast<std::uint64_t>(world) * broadcast_slot_bytes;
    l.broadcast_state_offset = l.broadcast_acks_offset + parts * static_cast<std::uint64_t>(world) * kFlagStride * 8;
    l.staging_offset =
        round_up(l.broadcast_state_offset + parts * CollectiveHandle::broadcast_state_words(broadcast_depth) * 8, 256);
    l.total_bytes = l.staging_offset + static_cast<std::uint64_t>(max_parts) * 2 * half_bytes;
    return l;
  }
  // The bytes to zero before first use: flags, epochs, status, the LL lines and the broadcast's
  // (not the staging).
  constexpr std::uint64_t control_bytes() const { return staging_offset; }
};

}  // namespace aperture::collectives
