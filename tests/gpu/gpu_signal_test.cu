// tests/gpu/gpu_signal_test.cu — signal / wait_until_ge between GPUs on cuda-ipc memory.
//
// 1. A ring, several rounds: in round 0 every rank puts its own values into the next rank's
//    slot 0 and signals it; in round k it waits for the previous rank's round k-1, reads what
//    arrived and forwards it into the next rank's slot k. Every block runs its own chunk with its
//    own flag, one thread signalling after __syncthreads (the pattern of aperture/peer_view.h).
//    Forwarding reads the data the wait promised to make visible, so a missing release/acquire
//    shows as wrong values; after the last round slot k holds rank (me - k - 1)'s values.
// 2. All pairs, several rounds: every rank puts into every direct peer's slot [round][me] and
//    signals that peer's flag [me]; then it waits for every source and checks the data on the
//    GPU right after the wait, before the host checks every slot at the end.
// Waits are bounded (wait_until_ge_for, 30 s): a lost signal fails the test instead of hanging.
//
//     aperture launch -n 2 -- gpu_signal_test
#include "gpu_test.h"

namespace {

using gputest::pattern;

constexpr int kRounds = 32;
constexpr int kBlocks = 16;
constexpr int kThreads = 256;
constexpr std::size_t kCount = std::size_t{1} << 16;  // elements of one ring slot
constexpr std::size_t kChunk = kCount / kBlocks;      // one block's share
constexpr int kPairRounds = 16;
constexpr std::size_t kPairCount = 4096;              // elements of one all-pairs slot
constexpr std::uint64_t kTimeoutNs = 30'000'000'000ull;

static_assert(kCount % kBlocks == 0, "blocks split the slot evenly");

struct Outcome {
  unsigned long long wrong_on_device;  // elements that were wrong right after a wait
  unsigned long long timeouts;         // waits that gave up
  unsigned long long unbounded_wrong;  // wait_until_ge returned less than asked
};

// Waits (thread 0) until *flag >= value, then lets the whole block go on; false on timeout.
__device__ bool block_wait(const std::uint64_t* flag, std::uint64_t value, Outcome* outcome) {
  int ok = 1;
  if (threadIdx.x == 0) {
    std::uint64_t seen = 0;
    ok = aperture::wait_until_ge_for(flag, value, kTimeoutNs, &seen) ? 1 : 0;
    if (!ok) atomicAdd(&outcome->timeouts, 1ull);
    // Once it got there, the unbounded form returns at once with at least `value`.
    if (ok && aperture::wait_until_ge(flag, value) < value) atomicAdd(&outcome->unbounded_wrong, 1ull);
  }
  return __syncthreads_and(ok) != 0;
}

// data: kRounds slots of kCount; flags: kBlocks. Rank me sends to next, receives from prev.
__global__ void ring(std::int64_t* data, std::uint64_t* flags, int me, int n, const std::int64_t* table,
                     Outcome* outcome) {
  const int next = (me + 1) % n;
  const std::size_t begin = blockIdx.x * kChunk;
  std::uint64_t* flag = &flags[blockIdx.x];
  for (std::size_t i = begin + threadIdx.x; i < begin + kChunk; i += blockDim.x)
    aperture::store(&data[i], pattern<std::int64_t>(me, i), me, next, table);
  __syncthreads();
  if (threadIdx.x == 0) aperture::signal(flag, 1, me, next, table);
  for (int k = 1; k < kRounds; ++k) {
    if (!block_wait(flag, k, outcome)) return;
    // Slot k-1 came from prev and holds the values of rank (me - k) mod n.
    const int origin = ((me - k) % n + n) % n;
    std::int64_t* arrived = &data[(k - 1) * kCount];
    std::int64_t* outgoing = &data[k * kCount];
    for (std::size_t i = begin + threadIdx.x; i < begin + kChunk; i += blockDim.x) {
      const std::int64_t value = arrived[i];
      if (value != pattern<std::int64_t>(origin, i)) atomicAdd(&outcome->wrong_on_device, 1ull);
      aperture::store(&outgoing[i], value, me, next, table);
    }
    __syncthreads();
    if (threadIdx.x == 0) aperture::signal(flag, k + 1, me, next, table);
  }
  block_wait(flag, kRounds, outcome);  // the last round's data has arrived here
}

// slots: [kPairRounds][n][kPairCount]; flags: [n]; reaches_me[s]: source s writes here.
__global__ void all_pairs(aperture::PeerView peers, std::int64_t* slots, std::uint64_t* flags,
                          const int* reaches_me, Outcome* outcome) {
  const int me = peers.rank, n = peers.world_size;
  for (int round = 0; round < kPairRounds; ++round) {
    for (int p = 0; p < n; ++p) {
      if (!peers.is_direct(p)) continue;
      std::int64_t* slot = &slots[(static_cast<std::size_t>(round) * n + me) * kPairCount];
      for (std::size_t i = threadIdx.x; i < kPairCount; i += blockDim.x)
        peers.store(&slot[i], pattern<std::int64_t>(me, i, round + 1), p);
      __syncthreads();
      if (threadIdx.x == 0) peers.signal(&flags[me], static_cast<std::uint64_t>(round + 1), p);
    }
    for (int s = 0; s < n; ++s) {
      if (!reaches_me[s]) continue;
      if (!block_wait(&flags[s], round + 1, outcome)) return;
      const std::int64_t* slot = &slots[(static_cast<std::size_t>(round) * n + s) * kPairCount];
      for (std::size_t i = threadIdx.x; i < kPairCount; i += blockDim.x)
        if (slot[i] != pattern<std::int64_t>(s, i, round + 1)) atomicAdd(&outcome->wrong_on_device, 1ull);
    }
  }
}

void check_outcome(gputest::Job& job, const Outcome* device, const char* what) {
  const Outcome o = gputest::to_host(device, 1)[0];
  CHECK_MSG(o.timeouts == 0, std::string(what) + ": " + std::to_string(o.timeouts) + " waits timed out");
  CHECK_MSG(o.wrong_on_device == 0,
            std::string(what) + ": " + std::to_string(o.wrong_on_device) + " elements wrong right after the wait");
  CHECK_MSG(o.unbounded_wrong == 0, std::string(what) + ": wait_until_ge returned less than asked");
}

void ring_test(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  // data and flags in one allocation: one table translates both.
  const std::size_t data_bytes = kRounds * kCount * sizeof(std::int64_t);
  aperture::Allocation a = provider.allocate(data_bytes + kBlocks * sizeof(std::uint64_t));
  if (job.direct.empty()) job.learn_direct(a.map);
  bool ring_direct = true;
  for (int r = 0; r < n; ++r) ring_direct = ring_direct && job.reaches(r, (r + 1) % n);
  if (!ring_direct) {  // only where the hardware says so too (learn_direct checked): a skip, never a pass
    provider.free(a);
    GTEST_SKIP() << "rank " << me << ": ring skipped: not every rank reaches the next one directly";
  }
  auto* data = a.as<std::int64_t>();
  auto* flags = reinterpret_cast<std::uint64_t*>(data + kRounds * kCount);
  Outcome* outcome = nullptr;
  APERTURE_CUDA_CHECK(cudaMalloc(&outcome, sizeof(Outcome)), "test");
  APERTURE_CUDA_CHECK(cudaMemset(outcome, 0, sizeof(Outcome)), "test");
  APERTURE_CUDA_CHECK(cudaMemset(a.ptr, 0, a.bytes), "test");
  job.sync();  // every flag is 0 before anyone signals

  ring<<<kBlocks, kThreads>>>(data, flags, me, n, a.map.peer_bases(), outcome);
  gputest::launched("ring");
  job.sync();

  check_outcome(job, outcome, "ring");
  const auto host = gputest::to_host(data, kRounds * kCount);
  for (int k = 0; k < kRounds; ++k) {
    const int origin = ((me - k - 1) % n + n) % n;
    std::vector<std::int64_t> expected(kCount);
    for (std::size_t i = 0; i < kCount; ++i) expected[i] = pattern<std::int64_t>(origin, i);
    CHECK_RANGE(host.data() + k * kCount, expected,
                ("ring slot " + std::to_string(k) + " == rank " + std::to_string(origin) + "'s values").c_str());
  }
  const auto host_flags = gputest::to_host(flags, kBlocks);
  for (int b = 0; b < kBlocks; ++b) CHECK(host_flags[b] == static_cast<std::uint64_t>(kRounds));
  job.sync();
  APERTURE_CUDA_CHECK(cudaFree(outcome), "test");
  provider.free(a);
}

void all_pairs_test(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  const std::size_t slot_words = static_cast<std::size_t>(kPairRounds) * n * kPairCount;
  aperture::Allocation a = provider.allocate((slot_words + n) * sizeof(std::int64_t));
  auto* slots = a.as<std::int64_t>();
  auto* flags = reinterpret_cast<std::uint64_t*>(slots + slot_words);
  std::vector<int> reaches_me(n);
  for (int s = 0; s < n; ++s) reaches_me[s] = job.reaches(s, me) ? 1 : 0;
  int* reaches_dev = nullptr;
  Outcome* outcome = nullptr;
  APERTURE_CUDA_CHECK(cudaMalloc(&reaches_dev, n * sizeof(int)), "test");
  APERTURE_CUDA_CHECK(cudaMemcpy(reaches_dev, reaches_me.data(), n * sizeof(int), cudaMemcpyHostToDevice), "test");
  APERTURE_CUDA_CHECK(cudaMalloc(&outcome, sizeof(Outcome)), "test");
  APERTURE_CUDA_CHECK(cudaMemset(outcome, 0, sizeof(Outcome)), "test");
  APERTURE_CUDA_CHECK(cudaMemset(a.ptr, 0, a.bytes), "test");
  job.sync();

  all_pairs<<<1, kThreads>>>(a.map.peer_view(), slots, flags, reaches_dev, outcome);
  gputest::launched("all_pairs");
  job.sync();

  check_outcome(job, outcome, "all pairs");
  const auto host = gputest::to_host(slots, slot_words);
  for (int round = 0; round < kPairRounds; ++round) {
    for (int s = 0; s < n; ++s) {
      std::vector<std::int64_t> expected(kPairCount, 0);
      if (reaches_me[s])
        for (std::size_t i = 0; i < kPairCount; ++i) expected[i] = pattern<std::int64_t>(s, i, round + 1);
      CHECK_RANGE(host.data() + (static_cast<std::size_t>(round) * n + s) * kPairCount, expected,
                  ("all pairs round " + std::to_string(round) + " from rank " + std::to_string(s)).c_str());
    }
  }
  const auto host_flags = gputest::to_host(flags, n);
  for (int s = 0; s < n; ++s)
    CHECK(host_flags[s] == (reaches_me[s] ? static_cast<std::uint64_t>(kPairRounds) : 0u));
  job.sync();
  APERTURE_CUDA_CHECK(cudaFree(reaches_dev), "test");
  APERTURE_CUDA_CHECK(cudaFree(outcome), "test");
  provider.free(a);
}

}  // namespace

TEST(GpuSignal, Ring) { ring_test(gputest::job()); }
TEST(GpuSignal, AllPairs) { all_pairs_test(gputest::job()); }

int main(int argc, char** argv) {
  return gputest::run_tests(argc, argv, "gpu_signal_test", [] { return gputest::start("gpu_signal_test"); });
}
