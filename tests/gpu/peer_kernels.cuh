// tests/gpu/peer_kernels.cuh — the kernels the GPU tests share, written once against a peer table
// for any provider's memory (cuda-ipc, cuda-vmm, NVSHMEM, NCCL), what they must leave behind, and
// the checks that drive them: store, load, put, get and copy against every direct peer, one
// allocation's table used for another allocation's memory, and a view of an allocation.
//
// Each kernel reaches every direct peer (table entry != 0) in slots of `count` elements, one
// operation per element or per kChunk elements, with pattern() values distinct per rank, element
// and salt, so a wrong peer or offset shows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu_test.h"

namespace gputest {

constexpr std::size_t kChunk = 32;  // elements one thread puts, gets or copies

__device__ inline std::size_t thread_index() { return blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; }
__device__ inline std::size_t thread_count() { return static_cast<std::size_t>(gridDim.x) * blockDim.x; }

template <class T>
__global__ void fill(T* data, std::size_t count, int rank, int salt) {
  for (std::size_t i = thread_index(); i < count; i += thread_count()) data[i] = pattern<T>(rank, i, salt);
}

// inbox[me][i] of every direct peer = pattern(me, i, salt), one aperture::store per element.
template <class T>
__global__ void store_to_peers(T* inbox, std::size_t count, int me, int n, const std::int64_t* table, int salt) {
  for (int p = 0; p < n; ++p) {
    if (table[p] == 0) continue;
    for (std::size_t i = thread_index(); i < count; i += thread_count())
      aperture::store(&inbox[me * count + i], pattern<T>(me, i, salt), me, p, table);
  }
}

// result[p][i] = peer p's src[i], one aperture::load per element.
template <class T>
__global__ void load_from_peers(T* result, const T* src, std::size_t count, int me, int n,
                                const std::int64_t* src_table) {
  for (int p = 0; p < n; ++p) {
    if (src_table[p] == 0) continue;
    for (std::size_t i = thread_index(); i < count; i += thread_count())
      result[p * count + i] = aperture::load(&src[i], me, p, src_table);
  }
}

// inbox[me] of every direct peer = my src, kChunk elements per aperture::put.
template <class T>
__global__ void put_to_peers(T* inbox, const T* src, std::size_t count, int me, int n,
                             const std::int64_t* inbox_table) {
  for (int p = 0; p < n; ++p) {
    if (inbox_table[p] == 0) continue;
    for (std::size_t c = thread_index(); c < count / kChunk; c += thread_count())
      aperture::put(&inbox[me * count + c * kChunk], &src[c * kChunk], kChunk, me, p, inbox_table);
  }
}

// result[p] = peer p's src, kChunk elements per aperture::get.
template <class T>
__global__ void get_from_peers(T* result, const T* src, std::size_t count, int me, int n,
                               const std::int64_t* src_table) {
  for (int p = 0; p < n; ++p) {
    if (src_table[p] == 0) continue;
    for (std::size_t c = thread_index(); c < count / kChunk; c += thread_count())
      aperture::get(&result[p * count + c * kChunk], &src[c * kChunk], kChunk, me, p, src_table);
  }
}

// Third-party copies: for every direct a and b, a's src -> b's inbox[me][a], both pointers given
// in this rank's address space. src and the copy inbox are regions of one allocation, so the
// one table translates both legs.
template <class T>
__global__ void copy_between_peers(T* inbox, const T* src, std::size_t count, int me, int n,
                                   const std::int64_t* table) {
  for (int a = 0; a < n; ++a) {
    if (table[a] == 0) continue;
    for (int b = 0; b < n; ++b) {
      if (table[b] == 0) continue;
      for (std::size_t c = thread_index(); c < count / kChunk; c += thread_count())
        aperture::copy(&inbox[(static_cast<std::size_t>(me) * n + a) * count + c * kChunk], &src[c * kChunk], kChunk,
                       /*src_rank=*/a, /*dst_rank=*/b, /*cur_rank=*/me, table);
    }
  }
}

// view[me][i] of every direct peer = pattern(me, i, 5), translated through the view's table;
// counts the elements where the whole allocation's table translates elsewhere.
__global__ void store_through_view(std::int64_t* view, std::size_t count, int me, int n,
                                   const std::int64_t* view_table, const std::int64_t* whole_table,
                                   unsigned long long* disagreements) {
  for (int p = 0; p < n; ++p) {
    if (view_table[p] == 0) continue;
    for (std::size_t i = thread_index(); i < count; i += thread_count()) {
      std::int64_t* through_view = aperture::translate(&view[me * count + i], me, p, view_table);
      std::int64_t* through_whole = aperture::translate(&view[me * count + i], me, p, whole_table);
      if (through_view != through_whole) atomicAdd(disagreements, 1ull);
      *through_view = pattern<std::int64_t>(me, i, 5);
    }
  }
}

// ---- what they leave behind ----------------------------------------------------------------------

// Expected contents of `slots` slots of `count`: slot s holds pattern(source_of(s), i, salt)
// where written(s), else 0.
template <class T, class Written, class Source>
std::vector<T> expected_slots(std::size_t slots, std::size_t count, int salt, Written written, Source source_of) {
  std::vector<T> expected(slots * count, T(0));
  for (std::size_t s = 0; s < slots; ++s)
    if (written(s))
      for (std::size_t i = 0; i < count; ++i) expected[s * count + i] = pattern<T>(source_of(s), i, salt);
  return expected;
}

// An inbox after store or put: slot s holds source s's values where s reaches this rank.
template <class T>
std::vector<T> expected_from_sources(const Job& job, std::size_t count, int salt) {
  return expected_slots<T>(
      job.n, count, salt, [&](std::size_t s) { return job.reaches(int(s), job.me); },
      [](std::size_t s) { return int(s); });
}

// A result after load or get: slot p holds peer p's values where this rank reaches p.
template <class T>
std::vector<T> expected_from_peers(const Job& job, std::size_t count, int salt) {
  return expected_slots<T>(
      job.n, count, salt, [&](std::size_t p) { return job.reaches(job.me, int(p)); },
      [](std::size_t p) { return int(p); });
}

// ---- the check: store, load, put, get and copy against every direct peer -------------------------

// Elements per slot and the grid each kernel runs on.
struct RmaShape {
  std::size_t count;
  int blocks;
  int threads;
};

// Whether allocate() zeroes every allocation (the foreign providers do) or may hand back space
// an earlier allocation used (the aperture heaps are zeroed once, at start-up): the check zeroes
// reused memory itself and relies on the provider for the rest.
enum class Fresh { zeroed, reused };

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  if constexpr (std::is_same_v<T, float>) return "float";
  return "double";
}

// Every rank writes into its slot of every direct peer's buffers (store, put, copy) and reads
// every direct peer's src (load, get); then every element of every buffer is checked.
template <class T>
void rma_with_every_peer(Job& job, RmaShape shape, Fresh fresh) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  const std::size_t count = shape.count;
  const std::size_t slot_bytes = count * sizeof(T);
  // One allocation holds src and the copy inbox (copy() translates both legs with one table).
  aperture::Allocation src_and_copy = provider.allocate(slot_bytes * (1 + static_cast<std::size_t>(n) * n));
  aperture::Allocation inbox = provider.allocate(slot_bytes * n);
  aperture::Allocation put_inbox = provider.allocate(slot_bytes * n);
  aperture::Allocation loaded = provider.allocate(slot_bytes * n);
  aperture::Allocation got = provider.allocate(slot_bytes * n);
  if (job.direct.empty()) job.learn_direct(inbox.map);
  T* src = src_and_copy.as<T>();
  T* copy_inbox = src + count;
  if (fresh == Fresh::reused)
    for (auto* a : {&src_and_copy, &inbox, &put_inbox, &loaded, &got})
      APERTURE_CUDA_CHECK(cudaMemset(a->ptr, 0, a->bytes), "test");
  fill<<<shape.blocks, shape.threads>>>(src, count, me, 2);
  launched("fill");
  job.sync();  // every rank's src is written and every inbox zeroed before anyone reaches out

  store_to_peers<<<shape.blocks, shape.threads>>>(inbox.as<T>(), count, me, n, inbox.map.peer_bases(), 1);
  launched("store_to_peers");
  load_from_peers<<<shape.blocks, shape.threads>>>(loaded.as<T>(), src, count, me, n, src_and_copy.map.peer_bases());
  launched("load_from_peers");
  put_to_peers<<<shape.blocks, shape.threads>>>(put_inbox.as<T>(), src, count, me, n, put_inbox.map.peer_bases());
  launched("put_to_peers");
  get_from_peers<<<shape.blocks, shape.threads>>>(got.as<T>(), src, count, me, n, src_and_copy.map.peer_bases());
  launched("get_from_peers");
  copy_between_peers<<<shape.blocks, shape.threads>>>(copy_inbox, src, count, me, n, src_and_copy.map.peer_bases());
  launched("copy_between_peers");
  job.sync();  // every rank's writes have landed

  const std::string t = type_name<T>();
  CHECK_RANGE(to_host(inbox.as<T>(), n * count).data(), expected_from_sources<T>(job, count, 1),
              ("store " + t + ": inbox[source] == pattern(source)").c_str());
  CHECK_RANGE(to_host(loaded.as<T>(), n * count).data(), expected_from_peers<T>(job, count, 2),
              ("load " + t + ": loaded[peer] == peer's src").c_str());
  CHECK_RANGE(to_host(put_inbox.as<T>(), n * count).data(), expected_from_sources<T>(job, count, 2),
              ("put " + t + ": put_inbox[source] == source's src").c_str());
  CHECK_RANGE(to_host(got.as<T>(), n * count).data(), expected_from_peers<T>(job, count, 2),
              ("get " + t + ": got[peer] == peer's src").c_str());
  // Slot (c, a) of my copy inbox: written by caller c from a's src, when c reaches a and me.
  CHECK_RANGE(to_host(copy_inbox, static_cast<std::size_t>(n) * n * count).data(),
              expected_slots<T>(
                  static_cast<std::size_t>(n) * n, count, 2,
                  [&](std::size_t s) { return job.reaches(int(s) / n, int(s) % n) && job.reaches(int(s) / n, me); },
                  [&](std::size_t s) { return int(s) % n; }),
              ("copy " + t + ": copy_inbox[caller][source] == source's src").c_str());
  job.sync();  // nobody frees while a peer still reads
  for (auto* a : {&got, &loaded, &put_inbox, &inbox, &src_and_copy}) provider.free(*a);
}

// ---- the check: one table for every allocation (linear providers) -------------------------------

// The distance between two allocations is the same in every peer's mapping and on every rank,
// so the store kernel, handed another allocation's table, writes into the right memory.
inline void cross_allocation(Job& job, RmaShape shape, Fresh fresh) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  const std::size_t count = shape.count;
  CHECK(provider.is_linear());
  aperture::Allocation first = provider.allocate(64);
  aperture::Allocation gap = provider.allocate(12345);  // something in between
  aperture::Allocation target = provider.allocate(n * count * sizeof(std::int64_t), 4096);
  CHECK(reinterpret_cast<std::uintptr_t>(target.ptr) % 4096 == 0);
  const auto a = first.map.host_peer_bases();
  const auto b = target.map.host_peer_bases();
  const std::int64_t distance = reinterpret_cast<std::int64_t>(target.ptr) - reinterpret_cast<std::int64_t>(first.ptr);
  for (int p = 0; p < n; ++p) {
    if (!first.map.is_direct(p)) continue;
    CHECK(b[p] - a[p] == distance);
    CHECK(aperture::translate(target.as<std::int64_t>(), me, p, a.data()) ==
          aperture::translate(target.as<std::int64_t>(), me, p, b.data()));
  }
  std::vector<std::int64_t> distances(n);
  job.team.allgather(&distance, distances.data(), sizeof distance);
  for (int r = 0; r < n; ++r) CHECK(distances[r] == distance);  // same offsets on every rank
  if (fresh == Fresh::reused) APERTURE_CUDA_CHECK(cudaMemset(target.ptr, 0, target.bytes), "test");
  job.sync();

  store_to_peers<<<shape.blocks, shape.threads>>>(target.as<std::int64_t>(), count, me, n, first.map.peer_bases(), 6);
  launched("store_to_peers (another allocation's table)");
  job.sync();
  CHECK_RANGE(to_host(target.as<std::int64_t>(), n * count).data(), expected_from_sources<std::int64_t>(job, count, 6),
              "cross-allocation: stored with another allocation's table");
  job.sync();  // nobody frees while a peer still writes
  provider.free(target);
  provider.free(gap);
  provider.free(first);
}

// ---- the check: a view (symmetric_address_map of a sub-range) ------------------------------------

// `vmap` maps n slots of shape.count int64 that start `offset` elements into `whole` (`total`
// elements, zeroed): the same ranks, its own base and length, every direct entry shifted by the
// offset and the others 0, and a kernel table of its own in device memory that matches the
// host's. Then the store kernel, through the view's table, must write where the whole
// allocation's table says (`disagreements`: a zeroed device counter) and nowhere else.
inline void check_view(Job& job, const aperture::Allocation& whole, std::size_t total, std::size_t offset,
                       const aperture::SymmetricAddressMap& vmap, RmaShape shape,
                       unsigned long long* disagreements) {
  const int me = job.me, n = job.n;
  const std::size_t count = shape.count;
  std::int64_t* view = whole.as<std::int64_t>() + offset;
  const std::size_t view_bytes = n * count * sizeof(std::int64_t);
  CHECK(vmap.local_rank == me);
  CHECK(vmap.world_size == n);
  CHECK(vmap.allocation_base == reinterpret_cast<std::uintptr_t>(view));
  CHECK(vmap.allocation_bytes == view_bytes);
  CHECK(vmap.owns(view, view_bytes));
  CHECK(!vmap.owns(view - 1));
  const auto whole_host = whole.map.host_peer_bases();
  const auto view_host = vmap.host_peer_bases();
  for (int p = 0; p < n; ++p) {
    CHECK(vmap.is_direct(p) == whole.map.is_direct(p));
    if (whole.map.is_direct(p))
      CHECK(view_host[p] == whole_host[p] + static_cast<std::int64_t>(offset * sizeof(std::int64_t)));
    else
      CHECK(view_host[p] == 0);
  }
  CHECK(vmap.peer_bases() != whole.map.peer_bases());
  CHECK(device_of(vmap.peer_bases()) >= 0);
  const auto device_copy = to_host(vmap.peer_bases(), n);
  for (int p = 0; p < n; ++p) CHECK(device_copy[p] == view_host[p]);
  job.sync();  // every rank's memory is zeroed before anyone stores

  store_through_view<<<shape.blocks, shape.threads>>>(view, count, me, n, vmap.peer_bases(), whole.map.peer_bases(),
                                                      disagreements);
  launched("store_through_view");
  job.sync();
  CHECK(to_host(disagreements, 1)[0] == 0);  // view and whole tables agree
  std::vector<std::int64_t> expected(total, 0);
  const auto slots = expected_from_sources<std::int64_t>(job, count, 5);
  std::copy(slots.begin(), slots.end(), expected.begin() + static_cast<std::ptrdiff_t>(offset));
  CHECK_RANGE(to_host(whole.as<std::int64_t>(), total).data(), expected,
              "view: whole[view offset + source slot] == pattern(source), 0 elsewhere");
}

}  // namespace gputest
