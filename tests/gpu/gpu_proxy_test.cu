// tests/gpu/gpu_proxy_test.cu — a kernel's operations on a peer that load/store cannot reach,
// carried kernel -> proxy queue -> proxy thread -> engine (aperture/gpu_proxy.h).
//
// Two ranks on one GPU, on the memory of the provider named (default shm):
//   shm                the host heap, mapped for the GPU (cudaHostRegister), so a kernel can
//                      address it directly where the table allows; reached across nodes by
//                      the MPI RMA engine (or the message engine, APERTURE_ENGINE=messages);
//   cuda-ipc, cuda-vmm GPU memory; reached across nodes by the message engine, whose target
//                      copies through pinned staging and runs atomics in a kernel.
// Run twice per provider:
//
//     aperture launch -n 2 -- gpu_proxy_test [PROVIDER]                    # one node: direct
//     aperture launch --mpi --nodes 2 -n 2 -- gpu_proxy_test [PROVIDER]    # two nodes (APERTURE_NODES):
//                                                                          # entry 0, through the proxy
//
// The same kernel, the same values, the same checks: every element of put (from GPU memory,
// two payloads per thread), get (into GPU memory), store, load, atomic_add (the old values must
// chain), atomic_cas, and a signal after the puts that the peer's kernel waits for and then
// reads the data behind. So the proxied run gives the results of the direct run, or fails.
// Then rank 0 times one thread's 8-byte put (store) and atomic_add on the peer, in a kernel and
// (for host memory, or through the engine) from the host through the same view, and prints the
// per-operation latency: in the proxied run the difference is what the proxy adds
// (kernel -> host -> engine).
//
// Exit 0 with "PASS ..." on rank 0; 1 naming the first wrong elements (or a run over 2 nodes that did
// not go through the proxy: APERTURE_TEST_EXPECTED_NODES); 77 without a GPU.
#include <aperture/aperture.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../common/counted_check.h"

namespace {

constexpr int kThreads = 128;
constexpr std::size_t kPer = 160;  // int64 per thread: 1280 bytes, two proxy payloads
constexpr std::size_t kN = kThreads * kPer;
constexpr std::uint64_t kTimeoutNs = 30'000'000'000ull;
constexpr int kLatencyOps = 2000;

__host__ __device__ std::int64_t value(int rank, std::size_t i, int salt) {
  return (static_cast<std::int64_t>(rank) + 1) * 1000003 + static_cast<std::int64_t>(i) * 17 + salt * 7919;
}
__host__ __device__ std::uint64_t addend(int rank, int t) { return static_cast<std::uint64_t>(rank * 100000 + t + 1); }
std::uint64_t counter_start(int rank) { return 1000u * (rank + 1); }
std::uint64_t word_start(int rank, int t) { return 5000u + t + 1000u * rank; }

// The symmetric layout: every rank's copy has these at the same offsets.
struct Shared {
  std::int64_t mine[kN];     // value(rank, i, 0): what the peer gets and loads
  std::int64_t inbox[kN];    // the peer's put lands here: value(peer, i, 1)
  std::int64_t stores[kThreads];
  std::uint64_t words[kThreads];  // atomic_cas targets
  std::uint64_t counter;          // atomic_add target
  std::uint64_t flag;             // the peer's signal
};

// What the kernel brings back, in GPU memory.
struct Results {
  std::int64_t source[kN];  // value(me, i, 1): the put's source, in GPU memory
  std::int64_t got[kN];     // get from the peer's mine
  std::int64_t loaded[kThreads];
  std::uint64_t olds[kThreads];
  std::uint64_t cas_olds[kThreads];
  unsigned long long wrong_after_wait;
  unsigned long long timeouts;
};

__global__ void exercise(aperture::PeerView peers, Shared* shared, Results* out) {
  const int me = peers.rank, peer = 1 - peers.rank;
  const int t = threadIdx.x;
  for (std::size_t i = t * kPer; i < (t + 1) * kPer; ++i) out->source[i] = value(me, i, 1);
  peers.put(&shared->inbox[t * kPer], &out->source[t * kPer], kPer, peer);
  peers.store(&shared->stores[t], value(me, t, 4), peer);
  out->olds[t] = peers.atomic_add(&shared->counter, addend(me, t), peer);
  out->cas_olds[t] =
      peers.atomic_cas(&shared->words[t], std::uint64_t{5000u + t + 1000u * peer}, std::uint64_t(value(me, t, 3)), peer);
  __syncthreads();
  if (t == 0) {
    peers.signal(&shared->flag, 1, peer);  // after every thread's put (they waited for theirs)
    std::uint64_t seen = 0;
    if (!aperture::wait_until_ge_for(&shared->flag, 1, kTimeoutNs, &seen)) atomicAdd(&out->timeouts, 1ull);
  }
  __syncthreads();
  // Behind the peer's signal: its puts into our inbox are visible (read through the view's own rank).
  for (std::size_t i = t * kPer; i < (t + 1) * kPer; ++i)
    if (peers.load(&shared->inbox[i], me) != value(peer, i, 1)) atomicAdd(&out->wrong_after_wait, 1ull);
  peers.get(&out->got[t * kPer], &shared->mine[t * kPer], kPer, peer);
  out->loaded[t] = peers.load(&shared->mine[t], peer);
}

// One thread, back to back: kLatencyOps 8-byte stores (puts), then as many atomic_adds; the
// nanoseconds of each loop.
__global__ void latency(aperture::PeerView peers, Shared* shared, unsigned long long* ns) {
  const int peer = 1 - peers.rank;
  std::uint64_t start = aperture::detail::device_time_ns();
  for (int i = 0; i < kLatencyOps; ++i) peers.store(&shared->stores[i % kThreads], std::int64_t(i), peer);
  const std::uint64_t mid = aperture::detail::device_time_ns();
  for (int i = 0; i < kLatencyOps; ++i) peers.atomic_add(&shared->counter, std::uint64_t{1}, peer);
  ns[0] = mid - start;
  ns[1] = aperture::detail::device_time_ns() - mid;
}

// Maps every copy the table holds (the caller's, and the peers' on its node) for the GPU and
// returns the table of device addresses; the registrations end with the returned guard.
struct Registered {
  std::vector<void*> ranges;
  ~Registered() {
    for (void* p : ranges) cudaHostUnregister(p);
  }
};
std::vector<std::int64_t> device_table(const aperture::SymmetricAddressMap& map, Registered& registered) {
  std::vector<std::int64_t> table(map.world_size, 0);
  const auto host = map.host_peer_bases();
  const std::uintptr_t page = 4096;
  for (int p = 0; p < map.world_size; ++p) {
    if (host[p] == 0) continue;
    const auto base = static_cast<std::uintptr_t>(host[p]);
    const std::uintptr_t begin = base & ~(page - 1);
    const std::uintptr_t end = (base + sizeof(Shared) + page - 1) & ~(page - 1);
    CUDA_OK(cudaHostRegister(reinterpret_cast<void*>(begin), end - begin, cudaHostRegisterMapped | cudaHostRegisterPortable));
    registered.ranges.push_back(reinterpret_cast<void*>(begin));
    void* device = nullptr;
    CUDA_OK(cudaHostGetDevicePointer(&device, reinterpret_cast<void*>(base), 0));
    table[p] = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(device));
  }
  return table;
}

std::string provider_name = "shm";  // argv[1]

TEST(GpuProxy, KernelReachesItsPeerDirectOrThroughTheProxy) {
  aperture::Team team = aperture::Team::from_env();
  ASSERT_EQ(team.size(), 2) << "gpu_proxy_test needs 2 ranks: run under aperture launch -n 2";
  CUDA_OK(cudaSetDevice(0));
  const int me = team.rank(), peer = 1 - me;
  auto provider = aperture::make_provider(provider_name, team);
  const bool gpu_memory = provider->memory_kind() == aperture::MemoryKind::device;
  aperture::Allocation allocation = provider->allocate(sizeof(Shared));
  const aperture::SymmetricAddressMap& map = allocation.map;
  const bool proxied = !map.is_direct(peer);
  // What the registration expects (APERTURE_TEST_EXPECTED_NODES, told by CTest or gpu-check rather
  // than read back from the launcher under test): 2 nodes means the peer must be reached through
  // the proxy and an engine; a run that quietly went direct would pass without testing either.
  const char* expected_text = std::getenv("APERTURE_TEST_EXPECTED_NODES");
  const int expected_nodes = expected_text != nullptr ? std::atoi(expected_text) : team.node_count();
  if (team.node_count() != expected_nodes || proxied != (expected_nodes > 1) ||
      (proxied && !map.engine().attached())) {
    provider->free(allocation);
    FAIL() << "rank " << me << ": " << team.node_count() << " node(s) (expected " << expected_nodes << "), peer "
           << (proxied ? "not direct" : "direct") << ", engine " << (map.engine().attached() ? "attached" : "not attached")
           << ": a run over 2 nodes must reach its peer through the proxy and an engine (aperture built with MPI, "
              "started by aperture launch --mpi --nodes 2), a run on one node directly";
  }

  // The initial contents, written into this rank's copy wherever it lives (UVA: one copy call).
  auto* shared = static_cast<Shared*>(allocation.ptr);
  auto image = std::make_unique<Shared>();
  for (std::size_t i = 0; i < kN; ++i) {
    image->mine[i] = value(me, i, 0);
    image->inbox[i] = -1;
  }
  for (int t = 0; t < kThreads; ++t) {
    image->stores[t] = -1;
    image->words[t] = word_start(me, t);
  }
  image->counter = counter_start(me);
  image->flag = 0;
  CUDA_OK(cudaMemcpy(shared, image.get(), sizeof(Shared), cudaMemcpyDefault));

  {
    // Host memory is mapped for the GPU and gets a table of device addresses; GPU memory's map
    // already carries its table in device memory.
    Registered registered;
    aperture::PeerView view = map.peer_view();
    std::int64_t* device_bases = nullptr;
    Shared* device_shared = shared;
    if (!gpu_memory) {
      const std::vector<std::int64_t> table = device_table(map, registered);
      CUDA_OK(cudaMalloc(&device_bases, table.size() * sizeof(std::int64_t)));
      CUDA_OK(cudaMemcpy(device_bases, table.data(), table.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice));
      view.peer_bases = device_bases;
      device_shared = reinterpret_cast<Shared*>(static_cast<std::uintptr_t>(table[me]));
    }
    std::unique_ptr<aperture::GpuProxy> proxy;
    if (proxied) {
      proxy = std::make_unique<aperture::GpuProxy>(map);
      view = proxy->peer_view(view);
    }
    Results* results = nullptr;
    CUDA_OK(cudaMalloc(&results, sizeof(Results)));
    CUDA_OK(cudaMemset(results, 0, sizeof(Results)));
    team.barrier();  // every copy is initialised before any kernel writes into it

    exercise<<<1, kThreads>>>(view, device_shared, results);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    team.barrier();  // the peer's kernel is done with our memory

    auto host = std::make_unique<Results>();
    CUDA_OK(cudaMemcpy(host.get(), results, sizeof(Results), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(image.get(), shared, sizeof(Shared), cudaMemcpyDefault));  // what the peer left here
    EXPECT_TRUE(test::counted(host->timeouts == 0)) << test::text("rank %d: the wait for the peer's signal timed out", me);
    EXPECT_TRUE(test::counted(host->wrong_after_wait == 0)) << test::text("rank %d: %llu inbox elements wrong right after the signal's wait", me,
           host->wrong_after_wait);
    for (std::size_t i = 0; i < kN; ++i) {
      EXPECT_TRUE(test::counted(image->inbox[i] == value(peer, i, 1))) << test::text("rank %d: inbox[%zu] = %lld, not %lld", me, i,
             (long long)image->inbox[i], (long long)value(peer, i, 1));
      EXPECT_TRUE(test::counted(host->got[i] == value(peer, i, 0))) << test::text("rank %d: got[%zu] = %lld, not %lld", me, i, (long long)host->got[i],
             (long long)value(peer, i, 0));
    }
    std::vector<std::pair<std::uint64_t, std::uint64_t>> adds;  // (old, added) of our adds at the peer
    for (int t = 0; t < kThreads; ++t) {
      EXPECT_TRUE(test::counted(image->stores[t] == value(peer, t, 4))) << test::text("rank %d: stores[%d] = %lld", me, t, (long long)image->stores[t]);
      EXPECT_TRUE(test::counted(host->loaded[t] == value(peer, t, 0))) << test::text("rank %d: loaded[%d] = %lld", me, t, (long long)host->loaded[t]);
      EXPECT_TRUE(test::counted(host->cas_olds[t] == word_start(peer, t))) << test::text("rank %d: cas old[%d] = %llu, not %llu", me, t,
             (unsigned long long)host->cas_olds[t], (unsigned long long)word_start(peer, t));
      EXPECT_TRUE(test::counted(image->words[t] == std::uint64_t(value(peer, t, 3)))) << test::text("rank %d: words[%d] = %llu", me, t,
             (unsigned long long)image->words[t]);
      adds.emplace_back(host->olds[t], addend(me, t));
    }
    std::sort(adds.begin(), adds.end());
    std::uint64_t expect = counter_start(peer);
    for (auto [old, add] : adds) {
      EXPECT_TRUE(test::counted(old == expect)) << test::text("rank %d: atomic_add old values do not chain: %llu, expected %llu", me,
             (unsigned long long)old, (unsigned long long)expect);
      expect = old + add;
    }
    std::uint64_t received = counter_start(me);
    for (int t = 0; t < kThreads; ++t) received += addend(peer, t);
    EXPECT_TRUE(test::counted(image->counter == received)) << test::text("rank %d: counter %llu, not %llu", me, (unsigned long long)image->counter,
           (unsigned long long)received);
    EXPECT_TRUE(test::counted(image->flag == 1)) << test::text("rank %d: flag %llu, not 1", me, (unsigned long long)image->flag);
    if (proxy) EXPECT_TRUE(test::counted(proxy->failures() == 0)) << test::text("rank %d: the engine failed: %s", me, proxy->last_error().c_str());

    // Latency: rank 0 issues, rank 1 only serves (its engine's progress or service thread answers).
    team.barrier();
    if (me == 0) {
      unsigned long long* ns = nullptr;
      CUDA_OK(cudaMalloc(&ns, 2 * sizeof(unsigned long long)));
      latency<<<1, 1>>>(view, device_shared, ns);
      CUDA_OK(cudaGetLastError());
      CUDA_OK(cudaDeviceSynchronize());
      unsigned long long kernel_ns[2] = {0, 0};
      CUDA_OK(cudaMemcpy(kernel_ns, ns, sizeof kernel_ns, cudaMemcpyDeviceToHost));
      CUDA_OK(cudaFree(ns));
      const double gpu_put = kernel_ns[0] / 1e3 / kLatencyOps, gpu_add = kernel_ns[1] / 1e3 / kLatencyOps;
      // The same operations from the host, through the same view's engine (or the peer's mapping
      // when direct, for host memory: the host cannot store into GPU memory): what the engine
      // itself costs.
      if (proxied || !gpu_memory) {
        aperture::PeerView host_view = map.peer_view();
        host_view.peer_bases = map.host_peer_bases().data();  // the host reads the host's copy of the table
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < kLatencyOps; ++i) host_view.store(&shared->stores[i % kThreads], std::int64_t(i), peer);
        const auto t1 = std::chrono::steady_clock::now();
        for (int i = 0; i < kLatencyOps; ++i) host_view.atomic_add(&shared->counter, std::uint64_t{1}, peer);
        const auto t2 = std::chrono::steady_clock::now();
        const double host_put = std::chrono::duration<double, std::micro>(t1 - t0).count() / kLatencyOps;
        const double host_add = std::chrono::duration<double, std::micro>(t2 - t1).count() / kLatencyOps;
        std::printf("LATENCY %s %s: 8-byte put: kernel %.2f us, host %.2f us; atomic_add: kernel %.2f us, host %.2f us "
                    "(per operation, one thread, %d back to back)%s\n",
                    provider_name.c_str(), proxied ? "proxied" : "direct", gpu_put, host_put, gpu_add, host_add,
                    kLatencyOps, proxied ? "; the kernel-host difference is the proxy's" : "");
      } else {
        std::printf("LATENCY %s direct: 8-byte put: kernel %.2f us; atomic_add: kernel %.2f us (per operation, one "
                    "thread, %d back to back)\n",
                    provider_name.c_str(), gpu_put, gpu_add, kLatencyOps);
      }
    }
    team.barrier();
    // The proxied run's operations went through the queue: its thread carried some out.
    if (proxy) EXPECT_TRUE(test::counted(proxy->completed() > 0)) << test::text("rank %d: the peer is on another node but the proxy carried out no request", me);
    if (proxy) proxy->stop();
    CUDA_OK(cudaFree(results));
    if (device_bases != nullptr) CUDA_OK(cudaFree(device_bases));
  }
  team.barrier();
  provider->free(allocation);
  if (!::testing::Test::HasFailure() && me == 0)
    std::printf("PASS gpu_proxy_test (%s memory, %s, put/get/store/load/atomic_add/atomic_cas/signal): %llu checks\n",
                provider_name.c_str(), proxied ? "peer on another node, through the GPU proxy and the engine" : "peer direct",
                test::checks.load());
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no GPU\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  if (argc > 1) provider_name = argv[1];
  return RUN_ALL_TESTS();
}
