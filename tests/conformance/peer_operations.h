// tests/conformance/peer_operations.h — the operations of MemoryAccessor, written once for both
// sides: a CPU loop (host_memory_accessor.cpp, one worker) and a CUDA kernel
// (device_memory_accessor.cu, one worker per thread) call the same functions with their worker
// index and count. Each worker takes every workers-th element (or chunk) of a slot.
#pragma once

#include <aperture/aperture.h>

#include <cstddef>
#include <cstdint>

#include "memory_accessor.h"

namespace conformance::ops {

// Runs f with a value of the element type `e` names (the accessors' way from Element to T).
template <class F>
void with_element(Element e, F&& f) {
  switch (e) {
    case Element::int32: return f(std::int32_t{});
    case Element::int64: return f(std::int64_t{});
    case Element::float32: return f(float{});
    case Element::float64: return f(double{});
  }
}

template <class T>
APERTURE_HD void fill(std::size_t w, std::size_t workers, T* data, std::size_t count, int rank, int salt) {
  for (std::size_t i = w; i < count; i += workers) data[i] = pattern<T>(rank, i, salt);
}

template <class T>
APERTURE_HD void store_to_peers(std::size_t w, std::size_t workers, T* inbox, std::size_t count, int me, int n,
                                const std::int64_t* table, int salt) {
  for (int p = 0; p < n; ++p) {
    if (table[p] == 0) continue;
    for (std::size_t i = w; i < count; i += workers)
      aperture::store(&inbox[me * count + i], pattern<T>(me, i, salt), me, p, table);
  }
}

template <class T>
APERTURE_HD void load_from_peers(std::size_t w, std::size_t workers, T* result, const T* src, std::size_t count,
                                 int me, int n, const std::int64_t* src_table) {
  for (int p = 0; p < n; ++p) {
    if (src_table[p] == 0) continue;
    for (std::size_t i = w; i < count; i += workers) result[p * count + i] = aperture::load(&src[i], me, p, src_table);
  }
}

// Elements in chunk c of a slot of `count`.
APERTURE_HD std::size_t chunk_length(std::size_t c, std::size_t count) {
  return count - c * kChunk < kChunk ? count - c * kChunk : kChunk;
}
APERTURE_HD std::size_t chunks(std::size_t count) { return (count + kChunk - 1) / kChunk; }

template <class T>
APERTURE_HD void put_to_peers(std::size_t w, std::size_t workers, T* inbox, const T* src, std::size_t count, int me,
                              int n, const std::int64_t* inbox_table) {
  for (int p = 0; p < n; ++p) {
    if (inbox_table[p] == 0) continue;
    for (std::size_t c = w; c < chunks(count); c += workers)
      aperture::put(&inbox[me * count + c * kChunk], &src[c * kChunk], chunk_length(c, count), me, p, inbox_table);
  }
}

template <class T>
APERTURE_HD void get_from_peers(std::size_t w, std::size_t workers, T* result, const T* src, std::size_t count,
                                int me, int n, const std::int64_t* src_table) {
  for (int p = 0; p < n; ++p) {
    if (src_table[p] == 0) continue;
    for (std::size_t c = w; c < chunks(count); c += workers)
      aperture::get(&result[p * count + c * kChunk], &src[c * kChunk], chunk_length(c, count), me, p, src_table);
  }
}

template <class T>
APERTURE_HD void copy_between_peers(std::size_t w, std::size_t workers, T* inbox, const T* src, std::size_t count,
                                    int me, int n, const std::int64_t* table) {
  for (int a = 0; a < n; ++a) {
    if (table[a] == 0) continue;
    for (int b = 0; b < n; ++b) {
      if (table[b] == 0) continue;
      for (std::size_t c = w; c < chunks(count); c += workers)
        aperture::copy(&inbox[(static_cast<std::size_t>(me) * n + a) * count + c * kChunk], &src[c * kChunk],
                       chunk_length(c, count), /*src_rank=*/a, /*dst_rank=*/b, /*cur_rank=*/me, table);
    }
  }
}

// Worker w's share of the atomics (see MemoryAccessor::atomics_to_peers). Orders and scopes are
// varied on purpose: every one must still land exactly once.
APERTURE_HD void atomics_to_peers(std::size_t w, std::int64_t* words, int me, int n, const std::int64_t* table,
                                         std::int64_t* cas_seen, std::int64_t* xchg_seen) {
  using aperture::order;
  using aperture::scope;
  for (int p = 0; p < n; ++p) {
    if (table[p] == 0) continue;
    aperture::atomic_add(&words[kAdd], std::int64_t{me + 1}, me, p, table);
    aperture::atomic_sub(&words[kSub], std::int64_t{1}, me, p, table, order::relaxed);
    // Every worker offers a maximum; the largest, from worker 6, must win.
    aperture::atomic_max(&words[kMax], std::int64_t{100 + 10 * me + static_cast<std::int64_t>(w % 7)}, me, p, table,
                         order::seq_cst);
    if (w != 0) continue;
    aperture::atomic_or(&words[kOr], std::int64_t{1} << me, me, p, table);
    aperture::atomic_and(&words[kAnd], ~(std::int64_t{1} << me), me, p, table, order::release);
    aperture::atomic_xor(&words[kXor], std::int64_t{1} << (me + 20), me, p, table);
    aperture::atomic_min(&words[kMin], std::int64_t{-100 - me}, me, p, table, order::acquire);
    // A ticket taken by compare-and-swap until it wins once: kTicket ends at the number of sources.
    std::int64_t seen = aperture::load(&words[kTicket], me, p, table);
    for (;;) {
      const std::int64_t found = aperture::atomic_cas(&words[kTicket], seen, seen + 1, me, p, table);
      if (found == seen) break;
      seen = found;
    }
    cas_seen[p] = aperture::atomic_cas(&words[kWords + me], std::int64_t{0}, std::int64_t{me + 1}, me, p, table);
    xchg_seen[p] = aperture::atomic_xchg(&words[kWords + n + me], std::int64_t{7 * (me + 1)}, me, p, table,
                                         order::seq_cst, scope::system);
  }
}

// Returns how many elements the whole allocation's table translates elsewhere than the view's.
APERTURE_HD unsigned long long store_through_view(std::size_t w, std::size_t workers, std::int64_t* view,
                                                         std::size_t count, int me, int n,
                                                         const std::int64_t* view_table,
                                                         const std::int64_t* whole_table) {
  unsigned long long disagreements = 0;
  for (int p = 0; p < n; ++p) {
    if (view_table[p] == 0) continue;
    for (std::size_t i = w; i < count; i += workers) {
      std::int64_t* through_view = aperture::translate(&view[me * count + i], me, p, view_table);
      std::int64_t* through_whole = aperture::translate(&view[me * count + i], me, p, whole_table);
      disagreements += through_view != through_whole;
      *through_view = pattern<std::int64_t>(me, i, 5);
    }
  }
  return disagreements;
}

APERTURE_HD void relay(std::size_t w, std::size_t workers, const std::int64_t* in, const std::int64_t* in_table,
                              std::int64_t* out, const std::int64_t* out_table, std::size_t count, int me, int n,
                              std::int64_t add) {
  for (int p = 0; p < n; ++p) {
    if (in_table[p] == 0 || out_table[p] == 0) continue;
    for (std::size_t i = w; i < count; i += workers) {
      const std::int64_t v = aperture::load(&in[i], me, p, in_table);
      aperture::store(&out[me * count + i], v + add, me, p, out_table);
    }
  }
}

// The data half of a ring round: worker w's elements of the next rank's data.
APERTURE_HD void ring_store(std::size_t w, std::size_t workers, const aperture::PeerView& peers,
                                   std::int64_t* data, std::size_t count, std::uint64_t round) {
  const int next = (peers.rank + 1) % peers.world_size;
  for (std::size_t i = w; i < count; i += workers)
    peers.store(&data[i], pattern<std::int64_t>(peers.rank, i, static_cast<int>(round)), next);
}

// The check half: worker w's elements that differ from what the previous rank stored.
APERTURE_HD unsigned long long ring_wrong(std::size_t w, std::size_t workers, const aperture::PeerView& peers,
                                                 const std::int64_t* data, std::size_t count, std::uint64_t round) {
  const int prev = (peers.rank + peers.world_size - 1) % peers.world_size;
  unsigned long long wrong = 0;
  for (std::size_t i = w; i < count; i += workers)
    wrong += data[i] != pattern<std::int64_t>(prev, i, static_cast<int>(round));
  return wrong;
}

// Bound on each ring wait: long enough for a loaded machine, short enough to fail, not hang.
constexpr std::uint64_t kWaitTimeoutNs = 30'000'000'000ull;

}  // namespace conformance::ops
