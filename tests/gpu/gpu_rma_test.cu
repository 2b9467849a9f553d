// tests/gpu/gpu_rma_test.cu — a PeerView passed to a kernel by value, on cuda-ipc memory: store,
// load, put, get, copy, atomic_add, atomic_cas and signal through its methods, against every
// direct peer, and translate/is_direct agreeing with the host's table. (The free functions on
// every provider's memory: the conformance suite, Conformance/ProviderTest.*.)
//
// Every rank writes into its own slot of every direct peer's buffer, with values distinct per
// rank and element; afterwards every rank copies its buffers to the host and checks every
// element: its slot of a peer that reached it holds that peer's values, every other slot is 0.
//
//     aperture launch -n 2 -- gpu_rma_test
#include "gpu_test.h"
#include "peer_kernels.cuh"

namespace {

using gputest::expected_from_peers;
using gputest::expected_from_sources;
using gputest::expected_slots;
using gputest::kChunk;
using gputest::pattern;
using gputest::thread_count;
using gputest::thread_index;

constexpr std::size_t kCount = std::size_t{1} << 14;  // elements per slot
constexpr int kBlocks = 64;
constexpr int kThreads = 256;

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
  job.learn_direct(all.map);
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
  gputest::fill<<<kBlocks, kThreads>>>(b.src, kCount, me, 7);
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
  const auto mine = [&](std::size_t) { return me; };
  CHECK_RANGE(host.data() + (b.stored - base), expected_from_sources<std::int64_t>(job, kCount, 8), "PeerView::store");
  CHECK_RANGE(host.data() + (b.put - base), expected_from_sources<std::int64_t>(job, kCount, 7), "PeerView::put");
  CHECK_RANGE(host.data() + (b.copied - base), expected_slots<std::int64_t>(n, kCount, 7, from_source, mine),
              "PeerView::copy (peer's src into the same peer)");
  CHECK_RANGE(host.data() + (b.loaded - base), expected_from_peers<std::int64_t>(job, kCount, 7), "PeerView::load");
  CHECK_RANGE(host.data() + (b.got - base), expected_from_peers<std::int64_t>(job, kCount, 7), "PeerView::get");
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

TEST(GpuRma, PeerViewByValue) {
  gputest::Job& job = gputest::job();
  EXPECT_EQ(job.provider->memory_kind(), aperture::MemoryKind::device);
  peer_view(job);
}

int main(int argc, char** argv) {
  return gputest::run_tests(argc, argv, "gpu_rma_test", [] { return gputest::start("gpu_rma_test"); });
}
