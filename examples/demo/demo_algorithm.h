// examples/demo/demo_algorithm.h — the demo's ring and all-reduce, written once for a CPU thread and a
// CUDA block, with the public operations only (translate, put, signal, wait_until_ge).
//
// A `Group` is whoever runs one rank's side together: one CPU thread (HostGroup, main.cpp)
// or one CUDA block (BlockGroup, demo_device.cu). It provides
//     thread(), threads()   this thread's index in the group and the group's size
//     leader()              the one thread that signals and waits
//     sync()                every thread of the group reaches this point (and sees the others' writes)
//     fence()               makes the group's earlier writes visible system-wide before a signal
//     wait(flag, value)     the leader waits for *flag >= value; false on every thread if it gave up
//     record_wrong(check, ...)  counts a wrong element, keeping the first one's details
//
// Values are distinct per rank and per element, so a wrong peer, offset or step shows as a wrong
// value, never as a lucky match; none is 0, so untouched memory never passes.
#pragma once

#include <cstdint>

#include "aperture/config.h"
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

// The group copies [src, src + n) into to_rank's copy of dst: one put on a CPU thread; on a
// block, one translation and then each thread a strided share (neighbouring threads, neighbouring
// elements).
template <class Group, class T>
APERTURE_HD void group_put(const Group& g, const PeerView& peers, T* dst, const T* src, std::uint64_t n, int to_rank) {
  if (g.threads() == 1) {
    peers.put(dst, src, n, to_rank);
    return;
  }
  T* remote = peers.translate(dst, to_rank);
  for (std::uint64_t i = g.thread(); i < n; i += g.threads()) remote[i] = src[i];
}

// After every thread's puts: the leader publishes them with one release signal.
template <class Group>
APERTURE_HD void group_signal(const Group& g, const PeerView& peers, std::uint64_t* flag, std::uint64_t value,
                              int to_rank) {
  g.sync();
  if (g.leader()) {
    g.fence();
    peers.signal(flag, value, to_rank);
  }
}

// Fills this rank's inputs and zeroes its flags. The caller then holds a team barrier, so no
// peer signals a flag before it is zeroed.
template <class Group>
APERTURE_HD void prepare(const Group& g, const PeerView& peers, const Buffers& b) {
  for (std::uint64_t i = g.thread(); i < b.flag_count; i += g.threads()) b.ring_data[i] = 0;
  for (std::uint64_t i = g.thread(); i < b.count; i += g.threads()) {
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
template <class Group>
APERTURE_HD bool ring(const Group& g, const PeerView& peers, const Buffers& b, Check* check, int round) {
  const int me = peers.rank;
  const int world = peers.world_size;
  const int next = (me + 1) % world;
  const int prev = (me + world - 1) % world;
  const int steps = world > 1 ? world - 1 : 1;  // one rank: a single step to itself
  const std::uint64_t before = static_cast<std::uint64_t>(round - 1) * static_cast<std::uint64_t>(steps);
  for (int k = 1; k <= steps; ++k) {
    const std::uint64_t step = before + static_cast<std::uint64_t>(k);  // counted across rounds
    const std::int64_t* src = k == 1 ? b.send : b.ring[(step - 1) % 2];
    if (step >= 3 && !g.wait(b.ring_free, step - 2)) return false;
    group_put(g, peers, b.ring[step % 2], src, b.count, next);
    if (step >= 2) group_signal(g, peers, b.ring_free, step - 1, prev);
    group_signal(g, peers, b.ring_data, step, next);
    if (!g.wait(b.ring_data, step)) return false;

    const int origin = ((me - k) % world + world) % world;
    const std::int64_t* got = b.ring[step % 2];
    for (std::uint64_t i = g.thread(); i < b.count; i += g.threads()) {
      const std::int64_t expected = ring_value(origin, i);
      if (got[i] != expected) g.record_wrong(check, kRing, k, origin, i, got[i], expected);
    }
    if (g.leader()) check->checked += b.count;
  }
  return true;
}

// (b) All-reduce (sum) as reduce-scatter then all-gather. Rank c owns chunk c: every rank puts
// its piece of chunk c into slot `me` of rank c and signals rs_flags[me] there; rank c adds the
// slots up, then puts the sum into every peer's ar_out and signals ag_flags[c] there. In round
// r the flags are signalled to r. Reusing the buffers is safe: rank c sums its slots before it
// sends its all-gather piece, and every rank waits for all pieces (and checks them) before its
// next round writes anything.
template <class Group>
APERTURE_HD bool all_reduce(const Group& g, const PeerView& peers, const Buffers& b, Check* check, int round) {
  const auto r = static_cast<std::uint64_t>(round);
  const int me = peers.rank;
  const int world = peers.world_size;
  for (int j = 0; j < world; ++j) {
    const int c = (me + j) % world;  // staggered, so the ranks do not all queue at one peer
    const std::uint64_t begin = chunk_begin(b.count, world, c);
    group_put(g, peers, b.slots + static_cast<std::uint64_t>(me) * b.max_chunk, b.ar_in + begin,
              chunk_begin(b.count, world, c + 1) - begin, c);
    group_signal(g, peers, b.rs_flags + me, r, c);
  }
  for (int s = 0; s < world; ++s)
    if (!g.wait(b.rs_flags + s, r)) return false;

  const std::uint64_t begin = chunk_begin(b.count, world, me);
  const std::uint64_t length = chunk_begin(b.count, world, me + 1) - begin;
  for (std::uint64_t i = g.thread(); i < length; i += g.threads()) {
    std::int64_t sum = 0;
    for (int s = 0; s < world; ++s) sum += b.slots[static_cast<std::uint64_t>(s) * b.max_chunk + i];
    b.ar_out[begin + i] = sum;
  }
  g.sync();  // the sums are written before any thread puts them

  for (int j = 1; j < world; ++j) {
    const int c = (me + j) % world;
    group_put(g, peers, b.ar_out + begin, b.ar_out + begin, length, c);
    group_signal(g, peers, b.ag_flags + me, r, c);
  }
  for (int s = 0; s < world; ++s)
    if (s != me && !g.wait(b.ag_flags + s, r)) return false;

  for (std::uint64_t i = g.thread(); i < b.count; i += g.threads()) {
    const std::int64_t expected = all_reduce_expected(world, i);
    if (b.ar_out[i] != expected) g.record_wrong(check, kAllReduce, 0, -1, i, b.ar_out[i], expected);
  }
  if (g.leader()) check->checked += b.count;
  return true;
}

}  // namespace aperture::demo
