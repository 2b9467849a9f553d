// aperture/collectives/detail/ll.h — the push ("LL", low-latency) protocol of the small collectives.
//
// The staged algorithms (all_reduce.h, ...) copy into their own staging, cross a barrier and then
// pull from the peers: two NVLink round trips per call. On the LL path each rank instead stores
// its data straight into every peer's LL slot (handle.h), in 16-byte lines made of two
// self-validating 8-byte words, each 4 payload bytes and a 4-byte flag of the epoch:
//     line = { payload[0..4), flag, payload[4..8), flag }     (one st.v4 on a GPU, as NCCL's LL)
// and then polls only its own memory until every word it needs carries this epoch's flag. No
// barrier and no signal: the data is its own signal, so a call costs one NVLink trip.
//
// Why no stale line is ever taken as fresh. Every part (CUDA block) has its own slots and its
// own epoch e (h.epochs[part]), raised by one per LL piece and per barrier by every algorithm;
// slot half e & 1 serves epoch e, so a half is reused every second epoch:
//   - A receiver clears (stores 0 into) every line it consumed, in the piece that read it; both
//     sides cut the same pieces into the same lines, so after epoch e a half holds only zeros.
//   - A sender stores epoch e's lines only after it has passed epoch e - 1: got every peer's
//     lines of e - 1, or crossed the barrier of e - 1. Every peer sends those only after its
//     clears of e - 2 (the same half) are ordered before them: g.all() and one fence between
//     pieces of a call (done()), the fence before a barrier's signal, the kernel boundary (GPU)
//     or the release stores (host) between calls. So a half is clean when the next lines land.
//   - The flag is 1 + (e mod (2^32 - 1)): never 0, so a cleared line never matches; and since no
//     line outlives its epoch, the flag's wrap-around cannot make an old line match.
//
// A broadcast on LL (broadcast.h's broadcast_ll). The argument above needs every sender to hear
// from every peer once per epoch; a root only sends, and in a broadcast a peer hears from the
// root alone, so on the shared epochs one broadcast piece would break the chain for every rank
// and every collective after it (the staged ones' reuse rule, session.h, rests on the same
// chain). It therefore runs on counters and memory of its own (handle.h's broadcast_*): piece
// numbers b, counted alike by every rank (every rank makes every broadcast call and cuts it into
// the same pieces), a ring of D = broadcast_depth slots per root on each receiver (slot
// [b % D][root]), and one acknowledgement word per peer on each root. Nothing else reads or
// writes them, so the other collectives' argument stands unchanged. Why root R never stores
// piece b's lines over lines a peer p has not yet consumed, and p never takes a wrong line:
//   - R stores into p's slot [b % D][R] only, and only R does; the lines there can only be R's,
//     of the last piece L < b that R rooted in ring slot b % D (R keeps L per slot in its
//     broadcast_state; L = 0: never, and the slots were zeroed at construction).
//   - p consumes and clears every line of piece L in piece L itself; then (every thread's clears
//     joined by g.all(), one fence) it raises ack[p] on R to L with a release store.
//   - Before storing piece b, R waits (acquire) until its ack[p] >= L. Only p raises ack[p] on
//     R, each time to a piece R rooted, in increasing order, so ack[p] >= L means p has cleared
//     L. Clears before the release, R's stores after the acquire: the lines land in a clean slot.
//   - p, in piece b, polls slot [b % D][R] for ll_flag(b). Lines of an earlier piece there were
//     cleared by p itself; R stores the next piece of that slot (b + D or later) only after p's
//     ack of b, which p raises after it read b. So every line p sees carrying flag(b) is b's.
//   - The flag is ll_flag(b), as above: no line outlives its piece, and D is far below the
//     flag's period, so wrap-around cannot make an old line match.
// So R waits for no peer except when it is a whole ring ahead of it: it returns once its lines
// are stored (an eager broadcast) and may run D calls ahead of its slowest peer. On a GPU the
// same template holds the argument (g.all() and one fence between every thread's clears and the
// ack; every thread's acquire wait joined by g.all() before any stores), but the Communicator
// allocates the ring on host memory only and never runs it there.
//
// After a wait gave up (status set), lines may be left behind: the scratch is then as broken as
// after any timeout. Two LL collectives in a row in one kernel are safe: unless the handle says
// the kernel ends with this call (CollectiveHandle::ll_ends_kernel, set only for the
// Communicator's own one-call kernels), the last piece fences like the pieces before it.
//
// Every helper here works on a CPU thread too (8-byte atomic words, release stores and acquire
// loads), so the same templates run on host memory; the automatic choice uses them on GPUs.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "aperture/collectives/detail/partition.h"
#include "aperture/collectives/detail/reduce.h"
#include "aperture/collectives/detail/session.h"
#include "aperture/collectives/detail/tuning.h"
#include "aperture/collectives/handle.h"
#include "aperture/config.h"
#include "aperture/detail/device_time.h"  // device_cancelled
#include "aperture/detail/host_wait.h"
#include "aperture/translate.h"

namespace aperture::collectives::detail {

struct alignas(16) LLLine {
  std::uint64_t lo;  // payload bytes 0..3 | flag << 32
  std::uint64_t hi;  // payload bytes 4..7 | flag << 32
};
inline constexpr std::uint64_t kLLLineBytes = sizeof(LLLine);
inline constexpr std::uint64_t kLLPayloadBytes = 8;
// Elements of T one line carries (T of 1, 2, 4 or 8 bytes: an element never straddles two lines).
template <class T>
inline constexpr std::uint64_t kLLElements = kLLPayloadBytes / sizeof(T);

// The flag of `epoch`: never 0 (the value of a cleared line).
APERTURE_HD std::uint32_t ll_flag(std::uint64_t epoch) {
  return static_cast<std::uint32_t>(epoch % 0xffffffffull) + 1u;
}

// Elements of T one piece (one epoch) moves per slot: the slot's lines, in whole 16-byte vectors
// of T so pieces cut where partition.h's splits do.
template <class T>
APERTURE_HD std::uint64_t ll_capacity(const CollectiveHandle& h) {
  constexpr std::uint64_t V = kVectorElements<T>;
  const std::uint64_t n = h.ll_slot_bytes / kLLLineBytes * kLLElements<T> / V * V;
  return n > 0 ? n : V;
}

// Stores one line (`dst` already translated to the receiver).
APERTURE_HD void ll_store(LLLine* dst, std::uint64_t payload, std::uint32_t flag) {
  const auto lo = static_cast<std::uint32_t>(payload);
  const auto hi = static_cast<std::uint32_t>(payload >> 32);
  APERTURE_IF_DEVICE_ELSE(
      (asm volatile("st.volatile.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(lo), "r"(flag), "r"(hi), "r"(flag)
                    : "memory");),
      (const std::uint64_t f = static_cast<std::uint64_t>(flag) << 32;
       std::atomic_ref<std::uint64_t>(dst->lo).store(lo | f, std::memory_order_release);
       std::atomic_ref<std::uint64_t>(dst->hi).store(hi | f, std::memory_order_release);))
}

// True, and the payload, when both words of the local line carry `flag`.
APERTURE_HD bool ll_try_load(const LLLine* src, std::uint32_t flag, std::uint64_t& payload) {
  std::uint32_t d0 = 0, f0 = 0, d1 = 0, f1 = 0;
  APERTURE_IF_DEVICE_ELSE(
      (asm volatile("ld.volatile.v4.u32 {%0, %1, %2, %3}, [%4];"
                    : "=r"(d0), "=r"(f0), "=r"(d1), "=r"(f1)
                    : "l"(src)
                    : "memory");),
      (auto* line = const_cast<LLLine*>(src);
       const std::uint64_t lo = std::atomic_ref<std::uint64_t>(line->lo).load(std::memory_order_acquire);
       const std::uint64_t hi = std::atomic_ref<std::uint64_t>(line->hi).load(std::memory_order_acquire);
       d0 = static_cast<std::uint32_t>(lo); f0 = static_cast<std::uint32_t>(lo >> 32);
       d1 = static_cast<std::uint32_t>(hi); f1 = static_cast<std::uint32_t>(hi >> 32);))
  if (f0 != flag || f1 != flag) return false;
  payload = static_cast<std::uint64_t>(d0) | static_cast<std::uint64_t>(d1) << 32;
  return true;
}

APERTURE_HD void ll_clear(LLLine* line) {
  APERTURE_IF_DEVICE_ELSE(
      (asm volatile("st.volatile.v4.u32 [%0], {%1, %1, %1, %1};" ::"l"(line), "r"(0u) : "memory");),
      (std::atomic_ref<std::uint64_t>(line->lo).store(0, std::memory_order_relaxed);
       std::atomic_ref<std::uint64_t>(line->hi).store(0, std::memory_order_relaxed);))
}

// Waits until the local line carries `flag`, then clears it. False when the wait gave up
// (device: after timeout_ns, or once the host raised `cancel`, read only between sleeps; the
// host throws aperture::Error instead, like every host wait).
APERTURE_HD bool ll_receive(LLLine* line, std::uint32_t flag, std::uint64_t timeout_ns, const std::uint64_t* cancel,
                            std::uint64_t& payload) {
  bool got = false;
  APERTURE_IF_DEVICE_ELSE(
      (// A peer's line usually lands within a few microseconds: poll flat out first, then bounded.
       std::uint64_t start = 0;
       for (unsigned poll = 0;; ++poll) {
         if (ll_try_load(line, flag, payload)) {
           got = true;
           break;
         }
         if (poll < tuning::kLLSpins) continue;
         std::uint64_t now = 0;
         asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
         if (start == 0) start = now;
         if (now - start >= timeout_ns || aperture::detail::device_cancelled(cancel)) break;
         __nanosleep(tuning::kLLSleepNs);
       }),
      ((void)cancel; std::uint64_t seen = 0;
       got = aperture::detail::host_wait_until_ge_for(
           &line->lo, 1, timeout_ns != 0 ? timeout_ns : aperture::detail::host_timeout_ns(), &seen,
           [&](const std::uint64_t*) -> std::uint64_t { return ll_try_load(line, flag, payload) ? 1 : 0; });
       if (!got) aperture::detail::throw_wait_timeout(&line->lo, flag, line->lo >> 32);))
  if (got) ll_clear(line);
  return got;
}

// A rank's elements [at, at + valid) as one line's payload, zero-padded (`aligned`: src is
// 8-byte aligned, so a whole line is one load).
template <class T>
APERTURE_HD std::uint64_t ll_pack(const T* src, std::uint64_t valid, bool aligned) {
  if (aligned && valid == kLLElements<T>) {
    // One 8-byte load (a memcpy the host compiler folds into one; nvcc would not know the
    // alignment and load bytes).
    std::uint64_t whole = 0;
    APERTURE_IF_DEVICE_ELSE((whole = *reinterpret_cast<const std::uint64_t*>(src);),
                            (std::memcpy(&whole, static_cast<const void*>(src), sizeof whole);))
    return whole;
  }
  unsigned char bytes[kLLPayloadBytes] = {};
  for (std::uint64_t k = 0; k < valid && k < kLLElements<T>; ++k) memcpy(bytes + k * sizeof(T), src + k, sizeof(T));
  std::uint64_t payload = 0;
  memcpy(&payload, bytes, sizeof payload);
  return payload;
}

// The first `valid` elements of a payload into dst.
template <class T>
APERTURE_HD void ll_unpack(T* dst, std::uint64_t payload, std::uint64_t valid, bool aligned) {
  if (aligned && valid == kLLElements<T>) {
    APERTURE_IF_DEVICE_ELSE((*reinterpret_cast<std::uint64_t*>(dst) = payload;),
                            (std::memcpy(static_cast<void*>(dst), &payload, sizeof payload);))
    return;
  }
  unsigned char bytes[kLLPayloadBytes];
  memcpy(bytes, &payload, sizeof payload);
  for (std::uint64_t k = 0; k < valid && k < kLLElements<T>; ++k) memcpy(dst + k, bytes + k * sizeof(T), sizeof(T));
}

template <class T>
APERTURE_HD bool ll_aligned(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p) % kLLPayloadBytes == 0;
}

// The lines of a piece of n elements, and how many elements line j holds.
template <class T>
APERTURE_HD std::uint64_t ll_lines(std::uint64_t n) {
  return (n + kLLElements<T> - 1) / kLLElements<T>;
}
template <class T>
APERTURE_HD std::uint64_t ll_valid(std::uint64_t n, std::uint64_t line) {
  const std::uint64_t first = line * kLLElements<T>;
  return n - first < kLLElements<T> ? n - first : kLLElements<T>;
}

// One piece of an LL collective, on a Session (session.h) whose epoch it raises by one.
template <class Coop>
struct LLPiece {
  Session<Coop>& s;
  std::uint32_t flag;
  bool received = true;  // false once a wait of this thread gave up: later waits are skipped

  APERTURE_HD explicit LLPiece(Session<Coop>& session) : s(session), flag(ll_flag(++session.epoch)) {}

  // Rank `to`'s slot for lines from this rank (translated: where this thread stores).
  APERTURE_HD LLLine* remote_slot(int to) const {
    auto* mine = reinterpret_cast<LLLine*>(s.h.ll_slot(s.part, s.epoch, s.h.rank));
    return aperture::translate(mine, s.h.rank, to, s.h.peer_bases);
  }
  // This rank's slot for lines from rank `from`.
  APERTURE_HD LLLine* local_slot(int from) const {
    return reinterpret_cast<LLLine*>(s.h.ll_slot(s.part, s.epoch, from));
  }
  // This thread's lines of src[0, n) into rank `to`'s slot: line j by thread j mod threads.
  template <class T>
  APERTURE_HD void push(int to, const T* src, std::uint64_t n) const {
    LLLine* dst = remote_slot(to);
    const bool aligned = ll_aligned(src);
    for (std::uint64_t j = s.g.thread_rank(); j < ll_lines<T>(n); j += s.g.size())
      ll_store(dst + j, ll_pack(src + j * kLLElements<T>, ll_valid<T>(n, j), aligned), flag);
  }
  // Rank `from`'s line (0 when an earlier wait of this thread gave up), cleared after reading.
  APERTURE_HD std::uint64_t receive(int from, std::uint64_t line) {
    std::uint64_t payload = 0;
    if (received && !ll_receive(local_slot(from) + line, flag, s.h.timeout_ns, s.h.cancel, payload)) received = false;
    return payload;
  }
  // Joins the group. When another piece follows in this call, the clears of this one must reach
  // memory before any thread pushes the next (peers write this half again only after that), so
  // one thread fences after the group has synchronised; between calls the kernel boundary (GPU)
  // or the release stores (host) order them.
  APERTURE_HD bool done(bool more) {
    s.ok = s.g.all(received) && s.ok;
    if (more) {
      if (s.g.thread_rank() == 0) s.g.fence();
      s.g.sync();
    }
    return s.ok;
  }
};

// The piece loop of every LL collective. Per piece, this thread pushes its lines of
// source(to) + at to every peer `to`, then calls take(piece, at, j, valid) for the same lines j
// (so a line of source(me) may be overwritten by take: in place is safe).
template <class T, class Coop, class Source, class Take>
APERTURE_HD bool ll_pieces(const Coop& g, const CollectiveHandle& h, std::uint64_t count, Source source, Take take) {
  Session<Coop> s(g, h);
  for_each_piece<T>(g, count, ll_capacity<T>(h), [&](std::uint64_t at, std::uint64_t n, bool more) {
    LLPiece<Coop> piece(s);
    for (int d = 1; d < h.world_size; ++d) {
      const int to = (h.rank + d) % h.world_size;
      piece.push(to, source(to) + at, n);
    }
    for (std::uint64_t j = g.thread_rank(); j < ll_lines<T>(n); j += g.size()) take(piece, at, j, ll_valid<T>(n, j));
    // After the last piece too, unless the kernel ends here: another LL call may follow in it.
    return piece.done(more || !h.ll_ends_kernel);
  });
  return s.finish();
}

// out[i] = block(0)[i] of rank 0 (op) block(1)[i] of rank 1 (op) ..., in rank order: block(r) is
// what this rank contributes to rank r's result (all-reduce: `in` for every r; reduce-scatter:
// block r of `in`).
template <ReduceOp Op, class T, class Coop, class Block>
APERTURE_HD bool ll_reduce(const Coop& g, const CollectiveHandle& h, Block block, T* out, std::uint64_t count) {
  using F = Fold<Op, T>;
  using Acc = typename F::Acc;
  const F f(h.world_size);
  constexpr std::uint64_t E = kLLElements<T>;
  const T* own = block(h.rank);
  const bool own_aligned = ll_aligned(own);
  const bool out_aligned = ll_aligned(out);
  return ll_pieces<T>(g, h, count, block, [&](LLPiece<Coop>& piece, std::uint64_t at, std::uint64_t j,
                                               std::uint64_t valid) {
    Acc acc[E] = {};
    for (int r = 0; r < h.world_size; ++r) {
      const std::uint64_t payload = r == h.rank ? ll_pack(own + at + j * E, valid, own_aligned) : piece.receive(r, j);
      T x[E];
      memcpy(static_cast<void*>(x), &payload, sizeof payload);
      for (std::uint64_t k = 0; k < E; ++k) acc[k] = r == 0 ? f.first(x[k]) : f.next(acc[k], x[k]);
    }
    T result[E];
    for (std::uint64_t k = 0; k < E; ++k) result[k] = f.last(acc[k]);
    std::uint64_t packed = 0;
    memcpy(&packed, static_cast<const void*>(result), sizeof packed);
    ll_unpack(out + at + j * E, packed, valid, out_aligned);
  });
}

}  // namespace aperture::collectives::detail
