// examples/demo/demo_algorithm.h — the demo's ring and all-reduce, written once for a CPU thread
// and a CUDA block, with the public operations only: the group-cooperative put, signal and wait
// of aperture/coop_rma.h, each taking a Coop (aperture/coop.h) first.
//
// The Coop is whoever runs one rank's side together: one CPU thread (aperture::CoopHost,
// main.cpp) or one CUDA block (aperture::CoopBlock, demo_device.cu). Every thread of it calls
// every function here with the same arguments; the group's thread 0 signals and waits for it. A
// wait gives up after `timeout_ns` (0: APERTURE_TIMEOUT): false on every thread of a block, an
// aperture::Error on a CPU thread.
//
// Values are distinct per rank and per element, so a wrong peer, offset or step shows as a wrong
// value, never as a lucky match; none is 0, so untouched memory never passes.
#pragma once

#include <cstdint>

#include "aperture/config.h"
#include "aperture/coop.h"
#include "aperture/coop_rma.h"
#include "aperture/peer_view.h"

namespace aperture::demo {

// Where one rank's pieces lie inside its symmetric allocation, as pointers in its own address
// space. Offsets are the same on every rank, so each pointer is also a valid `from` pointer for
// put/signal into any peer's copy.
struct Buffers {
  std::uint64_t* ring_data = nullptr;  // the last ring step whose data is in ring[step % 2]
  std::uint64_t* ring_free = nullptr;  // the last ring step whose buffer `next` has finished with
  std::uint64_t* rs_flags = nullptr;   // [world]: rank s's piece of my chunk has arrived
  std::uint64_t* ag_flags = nullptr;   // [world]: rank s's reduced chunk has arrived
  std::int64_t* send = nullptr;        // [count]: this rank's ring data
  std::int64_t* ring[2] = {nullptr, nullptr};  // [count] each: what arrives from `prev`, double-buffered
  std::int64_t* ar_in = nullptr;       // [count]: this rank's all-reduce input
  std::int64_t* slots = nullptr;       // [world * max_chunk]: the pieces of my chunk, one slot per sender
  std::int64_t* ar_out = nullptr;      // [count]: the all-reduce result
  std::uint64_t count = 0;             // elements per rank
  std::uint64_t max_chunk = 0;         // ceil(count / world)
  std::uint64_t flag_count = 0;        // ring_data .. ag_flags, contiguous from ring_data
};

// What a rank found. Plain integers: a kernel updates it with atomics.
struct Check {
  unsigned long long wrong = 0;
  unsigned long long checked = 0;
  unsigned long long first_index = 0;
  long long first_got = 0;
  long long first_expected = 0;
  int first_phase = 0;  // 1: ring, 2: all-reduce
  int first_step = 0;   // ring step
  int first_origin = -1;  // the rank the wrong element came from (ring)
  int timed_out = 0;    // a device wait gave up
};

enum Phase : int { kRing = 1, kAllReduce = 2 };

APERTURE_HD std::int64_t ring_value(int origin, std::uint64_t i) {
  return (static_cast<std::int64_t>(origin + 1) << 32) | static_cast<std::int64_t>(i & 0xffffffffu);
}
APERTURE_HD std::int64_t all_reduce_input(int rank, std::uint64_t i) {
  return static_cast<std::int64_t>(rank + 1) * ((std::int64_t{1} << 32) + static_cast<std::int64_t>(i));
}
// The sum over ranks r = 0..world-1 of all_reduce_input(r, i).
APERTURE_HD std::int64_t all_reduce_expected(int world, std::uint64_t i) {
  return ((std::int64_t{1} << 32) + static_cast<std::int64_t>(i)) * (static_cast<std::int64_t>(world) * (world + 1) / 2);
}

// Chunk c of `count` elements split `world` ways: [chunk_begin(c), chunk_begin(c + 1)).
APERTURE_HD std::uint64_t chunk_begin(std::uint64_t count, int world, int c) {
  return count * static_cast<std::uint64_t>(c) / static_cast<std::uint64_t>(world);
}

// Counts a wrong element, keeping the first one's details (any thread; on a GPU many at once).
APERTURE_HD void record_wrong(Check* check, int phase, int step, int origin, std::uint64_t index, std::int64_t got,
                              std::int64_t expected) {
  bool first = false;
  APERTURE_IF_DEVICE_ELSE((first = atomicAdd(&check->wrong, 1ull) == 0;), (first = check->wrong++ == 0;))
  if (!first) return;
  check->first_phase = phase;
  check->first_step = step;
  check->first_origin = origin;
  check->first_index = index;
  check->first_got = got;
  check->first_expected = expected;
}

// Fills this rank's inputs and zeroes its flags. The caller then holds a team barrier, so no
// peer signals a flag before it is zeroed.
template <class Coop>
APERTURE_HD void prepare(const Coop& g, const PeerView& peers, const Buffers& b) {
  for (std::uint64_t i = g.thread_rank(); i < b.flag_count; i += g.size()) b.ring_data[i] = 0;
  for (std::uint64_t i = g.thread_rank(); i < b.count; i += g.size()) {
    b.send[i] = ring_value(peers.rank, i);
    b.ar_in[i] = all_reduce_input(peers.rank, i);
  }
  g.sync();
}

// (a) The ring: every rank's data travels all the way round. At step k each rank forwards what
// it received at step k-1 (its own data at step 1) to `next`, and receives from `prev` the data
// that started at rank (me - k). Two receive buffers alternate; before overwriting one, a rank
// waits until `next` says (ring_free) that it has forwarded and checked what was there.
// `round` (1, 2, ...) lets the ring run again on the same buffers: flags count steps across
// rounds, so they only ever grow.
template <class Coop>
APERTURE_HD bool ring(const Coop& g, const PeerView& peers, const Buffers& b, Check* check, int round,
                      std::uint64_t timeout_ns) {
  const int me = peers.rank;
  const int world = peers.world_size;
  const int next = (me + 1) % world;
  const int prev = (me + world - 1) % world;
  const int steps = world > 1 ? world - 1 : 1;  // one rank: a single step to itself
  const std::uint64_t before = static_cast<std::uint64_t>(round - 1) * static_cast<std::uint64_t>(steps);
  for (int k = 1; k <= steps; ++k) {
    const std::uint64_t step = before + static_cast<std::uint64_t>(k);  // counted across rounds
    const std::int64_t* src = k == 1 ? b.send : b.ring[(step - 1) % 2];
    if (step >= 3 && !aperture::wait_until_ge_for(g, b.ring_free, step - 2, timeout_ns)) return false;
    aperture::put(g, b.ring[step % 2], src, b.count, me, next, peers.peer_bases);
    if (step >= 2) aperture::signal(g, b.ring_free, step - 1, me, prev, peers.peer_bases);
    aperture::signal(g, b.ring_data, step, me, next, peers.peer_bases);
    if (!aperture::wait_until_ge_for(g, b.ring_data, step, timeout_ns)) return false;

    const int origin = ((me - k) % world + world) % world;
    const std::int64_t* got = b.ring[step % 2];
    for (std::uint64_t i = g.thread_rank(); i < b.count; i += g.size()) {
      const std::int64_t expected = ring_value(origin, i);
      if (got[i] != expected) record_wrong(check, kRing, k, origin, i, got[i], expected);
    }
    if (g.thread_rank() == 0) check->checked += b.count;
  }
  return true;
}

// (b) All-reduce (sum) as reduce-scatter then all-gather. Rank c owns chunk c: every rank puts
// its piece of chunk c into slot `me` of rank c and signals rs_flags[me] there; rank c adds the
// slots up, then puts the sum into every peer's ar_out and signals ag_flags[c] there. In round
// r the flags are signalled to r. Reusing the buffers is safe: rank c sums its slots before it
// sends its all-gather piece, and every rank waits for all pieces (and checks them) before its
// next round writes anything.
template <class Coop>
APERTURE_HD bool all_reduce(const Coop& g, const PeerView& peers, const Buffers& b, Check* check, int round,
                            std::uint64_t timeout_ns) {
  const auto r = static_cast<std::uint64_t>(round);
  const int me = peers.rank;
  const int world = peers.world_size;
  for (int j = 0; j < world; ++j) {
    const int c = (me + j) % world;  // staggered, so the ranks do not all queue at one peer
    const std::uint64_t begin = chunk_begin(b.count, world, c);
    aperture::put(g, b.slots + static_cast<std::uint64_t>(me) * b.max_chunk, b.ar_in + begin,
                  chunk_begin(b.count, world, c + 1) - begin, me, c, peers.peer_bases);
    aperture::signal(g, b.rs_flags + me, r, me, c, peers.peer_bases);
  }
  for (int s = 0; s < world; ++s)
    if (!aperture::wait_until_ge_for(g, b.rs_flags + s, r, timeout_ns)) return false;

  const std::uint64_t begin = chunk_begin(b.count, world, me);
  const std::uint64_t length = chunk_begin(b.count, world, me + 1) - begin;
  for (std::uint64_t i = g.thread_rank(); i < length; i += g.size()) {
    std::int64_t sum = 0;
    for (int s = 0; s < world; ++s) sum += b.slots[static_cast<std::uint64_t>(s) * b.max_chunk + i];
    b.ar_out[begin + i] = sum;
  }
  g.sync();  // the sums are written before any thread puts them

  for (int j = 1; j < world; ++j) {
    const int c = (me + j) % world;
    aperture::put(g, b.ar_out + begin, b.ar_out + begin, length, me, c, peers.peer_bases);
    aperture::signal(g, b.ag_flags + me, r, me, c, peers.peer_bases);
  }
  for (int s = 0; s < world; ++s)
    if (s != me && !aperture::wait_until_ge_for(g, b.ag_flags + s, r, timeout_ns)) return false;

  for (std::uint64_t i = g.thread_rank(); i < b.count; i += g.size()) {
    const std::int64_t expected = all_reduce_expected(world, i);
    if (b.ar_out[i] != expected) record_wrong(check, kAllReduce, 0, -1, i, b.ar_out[i], expected);
  }
  if (g.thread_rank() == 0) check->checked += b.count;
  return true;
}

}  // namespace aperture::demo
