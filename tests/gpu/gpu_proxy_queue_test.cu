// tests/gpu/gpu_proxy_queue_test.cu — the GPU proxy's queue with GPU threads as the producers,
// in one process, against an engine of the test's own (two "peers" of host memory, called by
// the proxy thread only). No MPI: what it checks is the device side of the channel — tickets
// in device memory, slots in mapped pinned memory, release/acquire over PCIe, back-pressure with
// 512 threads on 16 slots, payload staging from and into GPU memory, atomics' old values — that
// tests/gpu/gpu_proxy_test.cu then uses in front of the MPI engine.
//
//     gpu_proxy_queue_test        (exit 0 and "PASS ...", 1 naming wrong elements, 77 without a GPU)
//
// The kernel is a PeerView's ordinary code: rank 0 of three, its own copy in GPU memory
// (direct), ranks 1 and 2 with table entry 0 and the engine behind the proxy.
#include <aperture/aperture.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "../common/counted_check.h"

namespace {

constexpr int kBlocks = 4;
constexpr int kThreads = 128;
constexpr int kAll = kBlocks * kThreads;
constexpr std::size_t kPer = 160;  // int64 per thread and round: 1280 bytes, two payloads
constexpr int kRounds = 20;
constexpr int kPeers = 3;  // rank 0 (us, direct) and ranks 1, 2 (through the proxy)

// Each rank's copy: a region per thread, a flag per block, a word per thread, a counter.
struct Copy {
  std::int64_t region[kAll][kPer];
  std::uint64_t flag[kBlocks];
  std::uint64_t word[kAll];
  std::uint64_t counter;
};

__host__ __device__ std::int64_t value(int thread, int round, std::size_t i) {
  return (thread + 1) * 1000003LL + round * 7919LL + static_cast<std::int64_t>(i) * 17 + 3;
}
__host__ __device__ int peer_of(int block, int round) { return 1 + (block + round) % 2; }

// The peers' memory, on the host; called by the proxy thread only.
struct Engine {
  std::vector<std::unique_ptr<Copy>> copies;
  int signals = 0, signals_before_data = 0;
  Engine() {
    for (int p = 0; p < kPeers; ++p) {
      copies.push_back(std::make_unique<Copy>());
      std::memset(copies.back().get(), 0, sizeof(Copy));
    }
  }
  static void call(void* context, const aperture::EngineRequest& r, void* result) {
    auto& e = *static_cast<Engine*>(context);
    if (r.peer < 1 || r.peer >= kPeers || r.offset + std::max<std::uint64_t>(r.bytes, 8) > sizeof(Copy))
      throw aperture::Error(aperture::ErrorCode::invalid_argument, "test engine: request out of range");
    auto* base = reinterpret_cast<unsigned char*>(e.copies[r.peer].get());
    auto* word = reinterpret_cast<std::uint64_t*>(base + r.offset);
    switch (r.op) {
      case aperture::EngineOp::put: std::memcpy(base + r.offset, r.local, r.bytes); break;
      case aperture::EngineOp::get: std::memcpy(const_cast<void*>(r.local), base + r.offset, r.bytes); break;
      case aperture::EngineOp::fetch_op:
        std::memcpy(result, word, 8);
        *word += r.value;
        break;
      case aperture::EngineOp::compare_swap:
        std::memcpy(result, word, 8);
        if (*word == r.compare) *word = r.value;
        break;
      case aperture::EngineOp::signal: {
        *word = r.value;
        ++e.signals;
        // A block's signal of round r must find every one of its threads' round-r data.
        const int block = static_cast<int>((r.offset - offsetof(Copy, flag)) / 8);
        const int round = static_cast<int>(r.value);
        const Copy& c = *e.copies[r.peer];
        bool complete = true;
        for (int t = block * kThreads; t < (block + 1) * kThreads && complete; ++t)
          for (std::size_t i = 0; i < kPer; ++i)
            if (c.region[t][i] != value(t, round, i)) complete = false;
        if (!complete) ++e.signals_before_data;
        break;
      }
    }
  }
};

struct Out {
  std::int64_t source[kAll][kPer];  // the puts' source, in GPU memory
  std::int64_t got[kAll][kPer];     // get of the last round's region
  std::uint64_t olds[kAll];
  std::uint64_t cas_olds[kAll];
  std::int64_t loaded[kAll];
};

__global__ void producers(aperture::PeerView peers, Copy* mine, Out* out) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int round = 1; round <= kRounds; ++round) {
    const int peer = peer_of(blockIdx.x, round);
    for (std::size_t i = 0; i < kPer; ++i) out->source[t][i] = value(t, round, i);
    peers.put(mine->region[t], out->source[t], kPer, peer);
    __syncthreads();  // every thread's put has completed (each waits for its own)
    if (threadIdx.x == 0) peers.signal(&mine->flag[blockIdx.x], std::uint64_t(round), peer);
    __syncthreads();
  }
  const int peer = peer_of(blockIdx.x, kRounds);
  peers.get(out->got[t], mine->region[t], kPer, peer);
  out->olds[t] = peers.atomic_add(&mine->counter, std::uint64_t(t + 1), 1);
  out->cas_olds[t] = peers.atomic_cas(&mine->word[t], std::uint64_t{0}, std::uint64_t(value(t, 0, 0)), 2);
  peers.store(&mine->region[t][0], value(t, 99, 0), 1);
  out->loaded[t] = peers.load(&mine->region[t][0], 1);
}

TEST(GpuProxyQueue, GpuThreadsAsProducersEveryRequestCarriedOut) {
  CUDA_OK(cudaSetDevice(0));
  Engine engine;
  aperture::EngineChannel channel;
  channel.context = &engine;
  channel.host_call = &Engine::call;
  aperture::GpuProxy proxy(channel, nullptr,
                           aperture::GpuProxy::Options{16, aperture::GpuProxy::QueueMemory::device_mapped, 30});

  Copy* mine = nullptr;  // rank 0's own copy, in GPU memory
  CUDA_OK(cudaMalloc(&mine, sizeof(Copy)));
  CUDA_OK(cudaMemset(mine, 0, sizeof(Copy)));
  const std::int64_t table_host[kPeers] = {static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(mine)), 0, 0};
  std::int64_t* table = nullptr;
  CUDA_OK(cudaMalloc(&table, sizeof table_host));
  CUDA_OK(cudaMemcpy(table, table_host, sizeof table_host, cudaMemcpyHostToDevice));
  aperture::PeerView view{0, kPeers, table, sizeof(Copy), channel};
  view = proxy.peer_view(view);
  Out* out = nullptr;
  CUDA_OK(cudaMalloc(&out, sizeof(Out)));

  producers<<<kBlocks, kThreads>>>(view, mine, out);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  proxy.stop();

  auto host = std::make_unique<Out>();
  CUDA_OK(cudaMemcpy(host.get(), out, sizeof(Out), cudaMemcpyDeviceToHost));
  EXPECT_TRUE(test::counted(engine.signals == kBlocks * kRounds)) << test::text("%d signals carried out, not %d", engine.signals, kBlocks * kRounds);
  EXPECT_TRUE(test::counted(engine.signals_before_data == 0)) << test::text("%d signals landed before their block's data", engine.signals_before_data);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> adds;
  for (int t = 0; t < kAll; ++t) {
    const int block = t / kThreads;
    for (std::size_t i = 0; i < kPer; ++i) {
      EXPECT_TRUE(test::counted(host->got[t][i] == value(t, kRounds, i))) << test::text("got[%d][%zu] = %lld", t, i, (long long)host->got[t][i]);
      // Each peer holds the last round that went to it; region[t][0] of peer 1 was then stored over.
      for (int p = 1; p < kPeers; ++p) {
        const int last = peer_of(block, kRounds) == p ? kRounds : kRounds - 1;
        const std::int64_t expect = (p == 1 && i == 0) ? value(t, 99, 0) : value(t, last, i);
        EXPECT_TRUE(test::counted(engine.copies[p]->region[t][i] == expect)) << test::text("peer %d region[%d][%zu] = %lld, not %lld", p, t, i,
               (long long)engine.copies[p]->region[t][i], (long long)expect);
      }
    }
    EXPECT_TRUE(test::counted(host->loaded[t] == value(t, 99, 0))) << test::text("loaded[%d] = %lld", t, (long long)host->loaded[t]);
    EXPECT_TRUE(test::counted(host->cas_olds[t] == 0)) << test::text("cas old[%d] = %llu", t, (unsigned long long)host->cas_olds[t]);
    EXPECT_TRUE(test::counted(engine.copies[2]->word[t] == std::uint64_t(value(t, 0, 0)))) << test::text("peer 2 word[%d]", t);
    adds.emplace_back(host->olds[t], t + 1);
  }
  std::sort(adds.begin(), adds.end());
  std::uint64_t expect = 0;
  for (auto [old, add] : adds) {
    EXPECT_TRUE(test::counted(old == expect)) << test::text("atomic_add old values do not chain: %llu, expected %llu", (unsigned long long)old,
           (unsigned long long)expect);
    expect = old + add;
  }
  EXPECT_TRUE(test::counted(engine.copies[1]->counter == expect)) << test::text("peer 1 counter %llu, not %llu",
         (unsigned long long)engine.copies[1]->counter, (unsigned long long)expect);
  // per thread: kRounds x 2 put payloads, 2 get payloads, add, compare-swap, store, load; per block kRounds signals
  const std::uint64_t requests = std::uint64_t{kAll} * (kRounds * 2 + 2 + 4) + kBlocks * kRounds;
  EXPECT_TRUE(test::counted(proxy.completed() == requests)) << test::text("the proxy carried out %llu requests, not %llu",
         (unsigned long long)proxy.completed(), (unsigned long long)requests);
  EXPECT_TRUE(test::counted(proxy.failures() == 0)) << test::text("engine failures: %s", proxy.last_error().c_str());
  CUDA_OK(cudaFree(out));
  CUDA_OK(cudaFree(table));
  CUDA_OK(cudaFree(mine));
  if (!::testing::Test::HasFailure())
    std::printf("PASS gpu_proxy_queue_test (%d GPU threads on 16 slots, %d rounds, %llu requests): %llu checks\n", kAll,
                kRounds, (unsigned long long)requests, test::checks.load());
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no GPU\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
