// tests/gpu/gpu_rma_test.cu — store, load, put, get and copy in CUDA kernels, against every
// direct peer, on cuda-ipc memory; then views (symmetric_address_map), cross-allocation
// translation (the heap is linear) and a PeerView passed to a kernel by value.
//
// Every rank writes into its own slot of every direct peer's buffer, with values distinct per
// rank and element; afterwards every rank copies its buffers to the host and checks every
// element: its slot of a peer that reached it holds that peer's values, every other slot is 0.
//
//     aperture launch -n 2 -- gpu_rma_test
#include "gpu_test.h"

namespace {

using gputest::pattern;

constexpr std::size_t kCount = std::size_t{1} << 14;  // elements per slot
constexpr std::size_t kChunk = 32;                   // elements one thread puts/gets/copies
constexpr int kBlocks = 64;
constexpr int kThreads = 256;

__device__ std::size_t thread_index() { return blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; }
__device__ std::size_t thread_count() { return static_cast<std::size_t>(gridDim.x) * blockDim.x; }

template <class T>
__global__ void fill(T* data, std::size_t count, int rank, int salt) {
  for (std::size_t i = thread_index(); i < count; i += thread_count()) data[i] = pattern<T>(rank, i, salt);
}

// inbox[me][i] of every direct peer = pattern(me, i, 1), one aperture::store per element.
template <class T>
__global__ void store_to_peers(T* inbox, int me, int n, const std::int64_t* table) {
  for (int p = 0; p < n; ++p) {
    if (table[p] == 0) continue;
    for (std::size_t i = thread_index(); i < kCount; i += thread_count())
      aperture::store(&inbox[me * kCount + i], pattern<T>(me, i, 1), me, p, table);
  }
}

// result[p][i] = peer p's src[i], one aperture::load per element.
template <class T>
__global__ void load_from_peers(T* result, const T* src, int me, int n, const std::int64_t* src_table) {
  for (int p = 0; p < n; ++p) {
    if (src_table[p] == 0) continue;
    for (std::size_t i = thread_index(); i < kCount; i += thread_count())
      result[p * kCount + i] = aperture::load(&src[i], me, p, src_table);
  }
}

// inbox[me] of every direct peer = my src, kChunk elements per aperture::put.
template <class T>
__global__ void put_to_peers(T* inbox, const T* src, int me, int n, const std::int64_t* inbox_table) {
  for (int p = 0; p < n; ++p) {
    if (inbox_table[p] == 0) continue;
    for (std::size_t c = thread_index(); c < kCount / kChunk; c += thread_count())
      aperture::put(&inbox[me * kCount + c * kChunk], &src[c * kChunk], kChunk, me, p, inbox_table);
  }
}

// result[p] = peer p's src, kChunk elements per aperture::get.
template <class T>
__global__ void get_from_peers(T* result, const T* src, int me, int n, const std::int64_t* src_table) {
  for (int p = 0; p < n; ++p) {
    if (src_table[p] == 0) continue;
    for (std::size_t c = thread_index(); c < kCount / kChunk; c += thread_count())
      aperture::get(&result[p * kCount + c * kChunk], &src[c * kChunk], kChunk, me, p, src_table);
  }
}

// Third-party copies: for every direct a and b, a's src -> b's inbox[me][a], both pointers given
// in this rank's address space. src and the copy inbox are regions of one allocation, so the
// one table translates both legs.
template <class T>
__global__ void copy_between_peers(T* inbox, const T* src, int me, int n, const std::int64_t* table) {
  for (int a = 0; a < n; ++a) {
    if (table[a] == 0) continue;
    for (int b = 0; b < n; ++b) {
      if (table[b] == 0) continue;
      for (std::size_t c = thread_index(); c < kCount / kChunk; c += thread_count())
        aperture::copy(&inbox[(static_cast<std::size_t>(me) * n + a) * kCount + c * kChunk], &src[c * kChunk], kChunk,
                       /*src_rank=*/a, /*dst_rank=*/b, /*cur_rank=*/me, table);
    }
  }
}

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  if constexpr (std::is_same_v<T, float>) return "float";
  return "double";
}

// Expected contents of a buffer of `slots` slots: slot s holds pattern(source_of(s), i, salt)
// where written(s), else 0.
template <class T, class Written, class Source>
std::vector<T> expected_slots(std::size_t slots, int salt, Written written, Source source_of) {
  std::vector<T> expected(slots * kCount, T(0));
  for (std::size_t s = 0; s < slots; ++s)
    if (written(s))
      for (std::size_t i = 0; i < kCount; ++i) expected[s * kCount + i] = pattern<T>(source_of(s), i, salt);
  return expected;
}

template <class T>
void rma_for_type(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  const std::size_t slot_bytes = kCount * sizeof(T);
  // One allocation holds src and the copy inbox (copy() translates both legs with one table).
  aperture::Allocation src_and_copy = provider.allocate(slot_bytes * (1 + static_cast<std::size_t>(n) * n));
  aperture::Allocation inbox = provider.allocate(slot_bytes * n);
  aperture::Allocation put_inbox = provider.allocate(slot_bytes * n);
  aperture::Allocation loaded = provider.allocate(slot_bytes * n);
  aperture::Allocation got = provider.allocate(slot_bytes * n);
  if (job.direct.empty()) job.learn_direct(inbox.map);
  T* src = src_and_copy.as<T>();
  T* copy_inbox = src + kCount;
  for (auto* a : {&src_and_copy, &inbox, &put_inbox, &loaded, &got})
    APERTURE_CUDA_CHECK(cudaMemset(a->ptr, 0, a->bytes), "test");
  fill<<<kBlocks, kThreads>>>(src, kCount, me, 2);
  gputest::launched("fill");
  job.sync();  // every rank's src is written and every inbox zeroed before anyone reaches out

  store_to_peers<<<kBlocks, kThreads>>>(inbox.as<T>(), me, n, inbox.map.peer_bases());
  gputest::launched("store_to_peers");
  load_from_peers<<<kBlocks, kThreads>>>(loaded.as<T>(), src, me, n, src_and_copy.map.peer_bases());
  gputest::launched("load_from_peers");
  put_to_peers<<<kBlocks, kThreads>>>(put_inbox.as<T>(), src, me, n, put_inbox.map.peer_bases());
  gputest::launched("put_to_peers");
  get_from_peers<<<kBlocks, kThreads>>>(got.as<T>(), src, me, n, src_and_copy.map.peer_bases());
  gputest::launched("get_from_peers");
  copy_between_peers<<<kBlocks, kThreads>>>(copy_inbox, src, me, n, src_and_copy.map.peer_bases());
  gputest::launched("copy_between_peers");
  job.sync();  // every rank's writes have landed

  const std::string t = type_name<T>();
  const auto identity = [](std::size_t s) { return static_cast<int>(s); };
  {
    const auto host = gputest::to_host(inbox.as<T>(), n * kCount);
    const auto expected = expected_slots<T>(n, 1, [&](std::size_t s) { return job.reaches(int(s), me); }, identity);
    CHECK_RANGE(host.data(), expected, ("store " + t + ": inbox[source] == pattern(source)").c_str());
  }
  {
    const auto host = gputest::to_host(loaded.as<T>(), n * kCount);
    const auto expected = expected_slots<T>(n, 2, [&](std::size_t p) { return job.reaches(me, int(p)); }, identity);
    CHECK_RANGE(host.data(), expected, ("load " + t + ": loaded[peer] == peer's src").c_str());
  }
  {
    const auto host = gputest::to_host(put_inbox.as<T>(), n * kCount);
    const auto expected = expected_slots<T>(n, 2, [&](std::size_t s) { return job.reaches(int(s), me); }, identity);
    CHECK_RANGE(host.data(), expected, ("put " + t + ": put_inbox[source] == source's src").c_str());
  }
  {
    const auto host = gputest::to_host(got.as<T>(), n * kCount);
    const auto expected = expected_slots<T>(n, 2, [&](std::size_t p) { return job.reaches(me, int(p)); }, identity);
    CHECK_RANGE(host.data(), expected, ("get " + t + ": got[peer] == peer's src").c_str());
  }
  {
    // Slot (c, a) of my copy inbox: written by caller c from a's src, when c reaches a and me.
    const auto host = gputest::to_host(copy_inbox, static_cast<std::size_t>(n) * n * kCount);
    const auto expected = expected_slots<T>(
        static_cast<std::size_t>(n) * n, 2,
        [&](std::size_t s) { return job.reaches(int(s) / n, int(s) % n) && job.reaches(int(s) / n, me); },
        [&](std::size_t s) { return int(s) % n; });
    CHECK_RANGE(host.data(), expected, ("copy " + t + ": copy_inbox[caller][source] == source's src").c_str());
  }
  job.sync();  // nobody frees while a peer still reads
  for (auto* a : {&got, &loaded, &put_inbox, &inbox, &src_and_copy}) provider.free(*a);
}

// --- views: symmetric_address_map of a sub-range --------------------------------------------

__global__ void store_through_view(std::int64_t* view, int me, int n, const std::int64_t* view_table,
                                   const std::int64_t* whole_table, unsigned long long* disagreements) {
  for (int p = 0; p < n; ++p) {
    if (view_table[p] == 0) continue;
    for (std::size_t i = thread_index(); i < kCount; i += thread_count()) {
      std::int64_t* through_view = aperture::translate(&view[me * kCount + i], me, p, view_table);
      std::int64_t* through_whole = aperture::translate(&view[me * kCount + i], me, p, whole_table);
      if (through_view != through_whole) atomicAdd(disagreements, 1ull);
      *through_view = pattern<std::int64_t>(me, i, 5);
    }
  }
}

void views(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  constexpr std::size_t kViewOffset = 1017;  // elements: an odd offset, 8-byte aligned only
  const std::size_t total = kViewOffset + n * kCount + 100;
  aperture::Allocation whole = provider.allocate(total * sizeof(std::int64_t));
  aperture::Allocation counter = provider.allocate(sizeof(unsigned long long));
  APERTURE_CUDA_CHECK(cudaMemset(whole.ptr, 0, whole.bytes), "test");
  APERTURE_CUDA_CHECK(cudaMemset(counter.ptr, 0, counter.bytes), "test");
  std::int64_t* view = whole.as<std::int64_t>() + kViewOffset;
  const std::size_t view_bytes = n * kCount * sizeof(std::int64_t);
  const aperture::SymmetricAddressMap vmap = provider.symmetric_address_map(view, view_bytes);

  // The view's map: same ranks, its own base and length, every direct entry shifted.
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
      CHECK(view_host[p] == whole_host[p] + static_cast<std::int64_t>(kViewOffset * sizeof(std::int64_t)));
    else
      CHECK(view_host[p] == 0);
  }
  // Its kernel table lives in device memory, apart from the allocation's, and matches the host's.
  CHECK(vmap.peer_bases() != whole.map.peer_bases());
  cudaPointerAttributes attributes{};
  APERTURE_CUDA_CHECK(cudaPointerGetAttributes(&attributes, vmap.peer_bases()), "test");
  CHECK(attributes.type == cudaMemoryTypeDevice);
  const auto device_copy = gputest::to_host(vmap.peer_bases(), n);
  for (int p = 0; p < n; ++p) CHECK(device_copy[p] == view_host[p]);
  // A map of the whole allocation, asked for afterwards, has the allocation's table.
  const auto again = provider.symmetric_address_map(whole.ptr, whole.bytes);
  for (int p = 0; p < n; ++p) CHECK(again.host_peer_bases()[p] == whole_host[p]);
  job.sync();

  store_through_view<<<kBlocks, kThreads>>>(view, me, n, vmap.peer_bases(), whole.map.peer_bases(),
                                            counter.as<unsigned long long>());
  gputest::launched("store_through_view");
  job.sync();

  CHECK(gputest::to_host(counter.as<unsigned long long>(), 1)[0] == 0);  // view and whole tables agree
  const auto host = gputest::to_host(whole.as<std::int64_t>(), total);
  std::vector<std::int64_t> expected(total, 0);
  for (int s = 0; s < n; ++s)
    if (job.reaches(s, me))
      for (std::size_t i = 0; i < kCount; ++i) expected[kViewOffset + s * kCount + i] = pattern<std::int64_t>(s, i, 5);
  CHECK_RANGE(host.data(), expected, "view: whole[view offset + source slot] == pattern(source), 0 elsewhere");
  job.sync();
  provider.free(counter);
  provider.free(whole);
}

// --- cross-allocation translation: one table for every allocation (the heap is linear) -----

__global__ void store_with_other_table(std::int64_t* target, int me, int n, const std::int64_t* other_table) {
  for (int p = 0; p < n; ++p) {
    if (other_table[p] == 0) continue;
    for (std::size_t i = thread_index(); i < kCount; i += thread_count())
      aperture::store(&target[me * kCount + i], pattern<std::int64_t>(me, i, 6), me, p, other_table);
  }
}

void cross_allocation(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  CHECK(provider.is_linear());
  aperture::Allocation first = provider.allocate(64);
  aperture::Allocation gap = provider.allocate(12345);  // something in between
  aperture::Allocation target = provider.allocate(n * kCount * sizeof(std::int64_t), 4096);
  CHECK(reinterpret_cast<std::uintptr_t>(target.ptr) % 4096 == 0);
  // Linear: the distance between two allocations is the same in every peer's mapping.
  const auto a = first.map.host_peer_bases();
  const auto b = target.map.host_peer_bases();
  const std::int64_t distance = reinterpret_cast<std::int64_t>(target.ptr) - reinterpret_cast<std::int64_t>(first.ptr);
  for (int p = 0; p < n; ++p)
    if (first.map.is_direct(p)) CHECK(b[p] - a[p] == distance);
  std::vector<std::int64_t> distances(n);
  job.team.allgather(&distance, distances.data(), sizeof distance);
  for (int r = 0; r < n; ++r) CHECK(distances[r] == distance);  // same offsets on every rank
  APERTURE_CUDA_CHECK(cudaMemset(target.ptr, 0, target.bytes), "test");
  job.sync();

  store_with_other_table<<<kBlocks, kThreads>>>(target.as<std::int64_t>(), me, n, first.map.peer_bases());
  gputest::launched("store_with_other_table");
  job.sync();

  const auto host = gputest::to_host(target.as<std::int64_t>(), n * kCount);
  const auto expected = expected_slots<std::int64_t>(
      n, 6, [&](std::size_t s) { return job.reaches(int(s), me); }, [](std::size_t s) { return int(s); });
  CHECK_RANGE(host.data(), expected, "cross-allocation: stored with another allocation's table");
  job.sync();
  provider.free(target);
  provider.free(gap);
  provider.free(first);
}

// --- PeerView by value ------------------------------------------------------------------------

struct PeerViewBuffers {  // regions of one allocation, so the one PeerView serves all of them
  std::int64_t* src;        // kCount, pattern(me, i, 7)
  std::int64_t* stored;     // n slots: peers.store
  std::int64_t* put;        // n slots: peers.put
  std::int64_t* copied;     // n slots: peers.copy(p's src -> p's copied[me])
  std::int64_t* loaded;     // n slots: peers.load (local)
  std::int64_t* got;        // n slots: peers.get (local)
  std::int64_t* added;      // 1: peers.atomic_add from every thread of every source
  std::int64_t* swapped;    // n: peers.atomic_cas(0 -> source + 1)
  std::uint64_t* flags;     // n: peers.signal(source + 1)
  std::int64_t* seen;       // n: what peers.atomic_cas found at each target
};

__global__ void peer_view_kernel(aperture::PeerView peers, PeerViewBuffers b, const std::int64_t* expected_src,
                                 int* translate_ok, int* direct_seen) {
  const int me = peers.rank;
  for (int p = 0; p < peers.world_size; ++p) {
    if (thread_index() == 0) {
      direct_seen[p] = peers.is_direct(p) ? 1 : 0;
      const auto found = reinterpret_cast<std::int64_t>(peers.translate(b.src, p));
      translate_ok[p] = !peers.is_direct(p) || found == expected_src[p];
    }
    if (!peers.is_direct(p)) continue;
    for (std::size_t i = thread_index(); i < kCount; i += thread_count()) {
      peers.store(&b.stored[me * kCount + i], pattern<std::int64_t>(me, i, 8), p);
      b.loaded[p * kCount + i] = peers.load(&b.src[i], p);
    }
    for (std::size_t c = thread_index(); c < kCount / kChunk; c += thread_count()) {
      peers.put(&b.put[me * kCount + c * kChunk], &b.src[c * kChunk], kChunk, p);
      peers.get(&b.got[p * kCount + c * kChunk], &b.src[c * kChunk], kChunk, p);
      peers.copy(&b.copied[me * kCount + c * kChunk], &b.src[c * kChunk], kChunk, /*src_rank=*/p, /*dst_rank=*/p);
    }
    peers.atomic_add(b.added, std::int64_t{me + 1}, p);
    if (thread_index() == 0) {
      b.seen[p] = peers.atomic_cas(&b.swapped[me], std::int64_t{0}, std::int64_t{me + 1}, p);
      peers.signal(&b.flags[me], static_cast<std::uint64_t>(me + 1), p);
    }
  }
}

void peer_view(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  const std::size_t slots = 1 + 5 * static_cast<std::size_t>(n);
  const std::size_t words = slots * kCount + 1 + 3 * static_cast<std::size_t>(n);
  aperture::Allocation all = provider.allocate(words * sizeof(std::int64_t));
  APERTURE_CUDA_CHECK(cudaMemset(all.ptr, 0, all.bytes), "test");
  auto* base = all.as<std::int64_t>();
  PeerViewBuffers b{};
  b.src = base;
  b.stored = b.src + kCount;
  b.put = b.stored + n * kCount;
  b.copied = b.put + n * kCount;
  b.loaded = b.copied + n * kCount;
  b.got = b.loaded + n * kCount;
  b.added = b.got + n * kCount;
  b.swapped = b.added + 1;
  b.flags = reinterpret_cast<std::uint64_t*>(b.swapped + n);
  b.seen = reinterpret_cast<std::int64_t*>(b.flags + n);
  fill<<<kBlocks, kThreads>>>(b.src, kCount, me, 7);
  gputest::launched("fill");

  // Where the kernel must find each peer's src: the host table's entry (offset 0 = src).
  std::vector<std::int64_t> expected_src(all.map.host_peer_bases().begin(), all.map.host_peer_bases().end());
  std::int64_t* expected_dev = nullptr;
  int* flags_dev = nullptr;
  APERTURE_CUDA_CHECK(cudaMalloc(&expected_dev, n * sizeof(std::int64_t)), "test");
  APERTURE_CUDA_CHECK(cudaMalloc(&flags_dev, 2 * n * sizeof(int)), "test");
  APERTURE_CUDA_CHECK(cudaMemcpy(expected_dev, expected_src.data(), n * sizeof(std::int64_t), cudaMemcpyHostToDevice),
                      "test");
  const aperture::PeerView peers = all.map.peer_view();
  CHECK(peers.rank == me && peers.world_size == n && peers.peer_bases == all.map.peer_bases());
  job.sync();

  peer_view_kernel<<<kBlocks, kThreads>>>(peers, b, expected_dev, flags_dev, flags_dev + n);
  gputest::launched("peer_view_kernel");
  job.sync();

  const auto ok = gputest::to_host(flags_dev, 2 * static_cast<std::size_t>(n));
  for (int p = 0; p < n; ++p) {
    CHECK_MSG(ok[p] == 1, "PeerView::translate(src, " + std::to_string(p) + ") == host table entry");
    CHECK_MSG((ok[n + p] == 1) == all.map.is_direct(p), "PeerView::is_direct(" + std::to_string(p) + ")");
  }
  const auto host = gputest::to_host(base, words);
  const auto from_source = [&](std::size_t s) { return job.reaches(int(s), me); };
  const auto to_peer = [&](std::size_t p) { return job.reaches(me, int(p)); };
  const auto identity = [](std::size_t s) { return int(s); };
  const auto mine = [&](std::size_t) { return me; };
  CHECK_RANGE(host.data() + (b.stored - base), expected_slots<std::int64_t>(n, 8, from_source, identity),
              "PeerView::store");
  CHECK_RANGE(host.data() + (b.put - base), expected_slots<std::int64_t>(n, 7, from_source, identity), "PeerView::put");
  CHECK_RANGE(host.data() + (b.copied - base), expected_slots<std::int64_t>(n, 7, from_source, mine),
              "PeerView::copy (peer's src into the same peer)");
  CHECK_RANGE(host.data() + (b.loaded - base), expected_slots<std::int64_t>(n, 7, to_peer, identity), "PeerView::load");
  CHECK_RANGE(host.data() + (b.got - base), expected_slots<std::int64_t>(n, 7, to_peer, identity), "PeerView::get");
  std::int64_t added = 0;
  for (int s = 0; s < n; ++s)
    if (job.reaches(s, me)) added += static_cast<std::int64_t>(s + 1) * kBlocks * kThreads;
  const std::int64_t got_added = host[b.added - base];
  CHECK_MSG(got_added == added,
            "PeerView::atomic_add: got " + std::to_string(got_added) + ", expected " + std::to_string(added));
  for (int s = 0; s < n; ++s) {
    const std::int64_t want = job.reaches(s, me) ? s + 1 : 0;
    CHECK_MSG(host[b.swapped - base + s] == want, "PeerView::atomic_cas slot " + std::to_string(s));
    CHECK_MSG(host[reinterpret_cast<std::int64_t*>(b.flags) - base + s] == want,
              "PeerView::signal flag " + std::to_string(s));
    // The CAS found 0 wherever it ran (every source has its own slot).
    CHECK(host[b.seen - base + s] == 0);
  }
  job.sync();
  APERTURE_CUDA_CHECK(cudaFree(expected_dev), "test");
  APERTURE_CUDA_CHECK(cudaFree(flags_dev), "test");
  provider.free(all);
}

}  // namespace

int main() {
  return gputest::run_main("gpu_rma_test", [] {
    auto job_ptr = gputest::start("gpu_rma_test");
    gputest::Job& job = *job_ptr;
    CHECK(job.provider->memory_kind() == aperture::MemoryKind::device);
    rma_for_type<std::int32_t>(job);
    rma_for_type<std::int64_t>(job);
    rma_for_type<float>(job);
    rma_for_type<double>(job);
    views(job);
    cross_allocation(job);
    peer_view(job);
    return gputest::finish(job, "gpu_rma_test");
  });
}
