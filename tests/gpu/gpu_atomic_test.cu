// tests/gpu/gpu_atomic_test.cu — every atomic, on cuda-ipc memory, under contention: every
// thread of every rank hits the same cells of every direct peer (itself included) at once.
//
// For int32, uint32, int64, uint64 (all operations) and float, double (add, sub, min, max,
// xchg, cas), each target checks on the host:
//   - the final value of each cell against the combination of every value every source applied;
//   - add: the old values returned to all sources, sorted, step from the initial value to the
//     final one by exactly the increments the sources used (a linearisation exists);
//   - xchg: the old values and the final value are exactly the initial value and all tokens;
//   - cas: a compare-and-swap counter hands every thread of every source a distinct ticket, and
//     the tickets are exactly 0 .. N-1;
//   - relaxed order at system scope, device scope and block scope on the caller's own memory.
//
//     aperture launch -n 2 -- gpu_atomic_test
#include <algorithm>
#include <limits>

#include "gpu_test.h"

namespace {

constexpr int kBlocks = 132;  // one per SM of an H200
constexpr int kThreads = 256;
constexpr int kSourceThreads = kBlocks * kThreads;  // threads of one source, per target
constexpr int kCasBlocks = 8;                       // CAS loops: fewer threads, they retry
constexpr int kCasThreads = 128;
constexpr int kCasSourceThreads = kCasBlocks * kCasThreads;

enum Op { kAdd, kSub, kAnd, kOr, kXor, kMin, kMax, kXchg, kCas, kAddRelaxed, kAddDevice, kAddBlock, kOps };
constexpr std::size_t kLineBytes = 128;  // one cell per cache line

template <class T>
constexpr std::size_t stride = kLineBytes / sizeof(T);

template <class T>
__host__ __device__ T* cell(T* cells, Op op) {
  return cells + static_cast<std::size_t>(op) * stride<T>;
}

template <class T>
constexpr bool integral = std::is_integral_v<T>;

// What thread t of source s applies. All small integers, exact in float.
template <class T>
__host__ __device__ T increment(int s) { return static_cast<T>(s + 1); }
template <class T>
__host__ __device__ T bit_of(int s, int t) { return static_cast<T>(T(1) << ((s * 7 + t) % (8 * sizeof(T)))); }
template <class T>
__host__ __device__ T mixed(int s, int t) {  // for xor: spreads over every bit
  const unsigned long long x = (static_cast<unsigned long long>(s + 1) * 0x9E3779B97F4A7C15ull) ^
                               (static_cast<unsigned long long>(t) * 0xC2B2AE3D27D4EB4Full);
  return static_cast<T>(x >> 7);
}
template <class T>
__host__ __device__ T ranked(int s, int t) { return static_cast<T>((s + 1) * 100000 + t); }  // distinct, < 2^24
template <class T>
__host__ __device__ T token(int s, int t) { return static_cast<T>((s + 1) * 100000 + t + 1); }

template <class T>
T initial(Op op) {
  switch (op) {
    case kSub: return T(1 << 23);
    case kAnd:
      if constexpr (integral<T>) return static_cast<T>(~T(0));
      return T(0);
    case kMin: return std::numeric_limits<T>::max();
    case kMax: return std::numeric_limits<T>::lowest();
    default: return T(0);
  }
}

__device__ int global_thread() { return static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); }

// Every thread applies every operation to every direct peer's cells; the old values of add and
// xchg go to olds_add[p][t] and olds_xchg[p][t] (this rank's own memory).
template <class T>
__global__ void contend(T* cells, int me, int n, const std::int64_t* table, T* olds_add, T* olds_xchg) {
  using namespace aperture;
  const int t = global_thread();
  for (int p = 0; p < n; ++p) {
    if (table[p] == 0) continue;
    olds_add[p * kSourceThreads + t] = atomic_add(cell(cells, kAdd), increment<T>(me), me, p, table);
    atomic_sub(cell(cells, kSub), increment<T>(me), me, p, table);
    if constexpr (integral<T>) {
      atomic_and(cell(cells, kAnd), static_cast<T>(~bit_of<T>(me, t)), me, p, table);
      atomic_or(cell(cells, kOr), bit_of<T>(me, t), me, p, table);
      atomic_xor(cell(cells, kXor), mixed<T>(me, t), me, p, table);
    }
    atomic_min(cell(cells, kMin), ranked<T>(me, t), me, p, table);
    atomic_max(cell(cells, kMax), ranked<T>(me, t), me, p, table);
    olds_xchg[p * kSourceThreads + t] = atomic_xchg(cell(cells, kXchg), token<T>(me, t), me, p, table);
    atomic_add(cell(cells, kAddRelaxed), increment<T>(me), me, p, table, order::relaxed, scope::system);
  }
  // Narrower scopes are only right for the caller's own memory, and block scope only for one block.
  atomic_add(cell(cells, kAddDevice), increment<T>(me), me, me, table, order::acq_rel, scope::device);
  if (blockIdx.x == 0)
    atomic_add(cell(cells, kAddBlock), increment<T>(me), me, me, table, order::seq_cst, scope::block);
}

// A counter built from compare-and-swap alone: every thread takes one ticket from every direct
// peer's counter, retrying until its swap wins.
template <class T>
__global__ void take_tickets(T* cells, int me, int n, const std::int64_t* table, T* tickets) {
  const int t = global_thread();
  for (int p = 0; p < n; ++p) {
    if (table[p] == 0) continue;
    T expected = T(0);
    for (;;) {
      const T seen = aperture::atomic_cas(cell(cells, kCas), expected, static_cast<T>(expected + T(1)), me, p, table);
      if (seen == expected) break;
      expected = seen;
    }
    tickets[p * kCasSourceThreads + t] = expected;
  }
}

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  if constexpr (std::is_same_v<T, std::uint32_t>) return "uint32";
  if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  if constexpr (std::is_same_v<T, std::uint64_t>) return "uint64";
  if constexpr (std::is_same_v<T, float>) return "float";
  return "double";
}

template <class T>
std::string text(T v) {
  return std::to_string(v);
}

// Gathers every rank's [n targets][per_target] array; returns all[source][target][i].
template <class T>
std::vector<T> gather(gputest::Job& job, const T* device, std::size_t per_target) {
  const auto mine = gputest::to_host(device, job.n * per_target);
  std::vector<T> all(static_cast<std::size_t>(job.n) * mine.size());
  job.team.allgather(mine.data(), all.data(), mine.size() * sizeof(T));
  return all;
}

template <class T>
void atomics_for_type(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  const std::string t = type_name<T>();
  aperture::Allocation cells_alloc = provider.allocate(kOps * kLineBytes, kLineBytes);
  if (job.direct.empty()) job.learn_direct(cells_alloc.map);
  T* cells = cells_alloc.as<T>();
  std::vector<T> init(kOps * stride<T>, T(0));
  for (int op = 0; op < kOps; ++op) init[op * stride<T>] = initial<T>(static_cast<Op>(op));
  APERTURE_CUDA_CHECK(cudaMemcpy(cells, init.data(), cells_alloc.bytes, cudaMemcpyHostToDevice), "test");
  T *olds_add = nullptr, *olds_xchg = nullptr, *tickets = nullptr;
  APERTURE_CUDA_CHECK(cudaMalloc(&olds_add, n * kSourceThreads * sizeof(T)), "test");
  APERTURE_CUDA_CHECK(cudaMalloc(&olds_xchg, n * kSourceThreads * sizeof(T)), "test");
  APERTURE_CUDA_CHECK(cudaMalloc(&tickets, n * kCasSourceThreads * sizeof(T)), "test");
  job.sync();  // every rank's cells hold their initial values before anyone hits them

  contend<T><<<kBlocks, kThreads>>>(cells, me, n, cells_alloc.map.peer_bases(), olds_add, olds_xchg);
  gputest::launched("contend");
  take_tickets<T><<<kCasBlocks, kCasThreads>>>(cells, me, n, cells_alloc.map.peer_bases(), tickets);
  gputest::launched("take_tickets");
  job.sync();  // every source is done with every target

  const auto final_cells = gputest::to_host(cells, kOps * stride<T>);
  const auto final_of = [&](Op op) { return final_cells[op * stride<T>]; };
  const auto all_add = gather(job, olds_add, kSourceThreads);
  const auto all_xchg = gather(job, olds_xchg, kSourceThreads);
  const auto all_tickets = gather(job, tickets, kCasSourceThreads);
  const auto olds_for_me = [&](const std::vector<T>& all, int s, int per_target) {
    return all.data() + (static_cast<std::size_t>(s) * n + me) * per_target;
  };

  // Expected finals, from every source that reached this rank.
  T add = T(0), sub = initial<T>(kSub), and_ = initial<T>(kAnd), or_ = T(0), xor_ = T(0);
  T min = initial<T>(kMin), max = initial<T>(kMax);
  long long cas_total = 0;
  std::vector<T> steps;  // the increments sources used
  for (int s = 0; s < n; ++s) {
    if (!job.reaches(s, me)) continue;
    steps.push_back(increment<T>(s));
    for (int th = 0; th < kSourceThreads; ++th) {
      add = static_cast<T>(add + increment<T>(s));
      sub = static_cast<T>(sub - increment<T>(s));
      if constexpr (integral<T>) {
        and_ = static_cast<T>(and_ & ~bit_of<T>(s, th));
        or_ = static_cast<T>(or_ | bit_of<T>(s, th));
        xor_ = static_cast<T>(xor_ ^ mixed<T>(s, th));
      }
      min = std::min(min, ranked<T>(s, th));
      max = std::max(max, ranked<T>(s, th));
    }
    cas_total += kCasSourceThreads;
  }
  const auto expect = [&](Op op, T want, const char* what) {
    CHECK_MSG(final_of(op) == want, t + " " + what + ": got " + text(final_of(op)) + ", expected " + text(want));
  };
  expect(kAdd, add, "atomic_add final");
  expect(kSub, sub, "atomic_sub final");
  if constexpr (integral<T>) {
    expect(kAnd, and_, "atomic_and final");
    expect(kOr, or_, "atomic_or final");
    expect(kXor, xor_, "atomic_xor final");
  }
  expect(kMin, min, "atomic_min final");
  expect(kMax, max, "atomic_max final");
  expect(kAddRelaxed, add, "atomic_add(relaxed, system) final");
  expect(kAddDevice, increment<T>(me) * T(kSourceThreads), "atomic_add(acq_rel, device) on own memory");
  expect(kAddBlock, increment<T>(me) * T(kThreads), "atomic_add(seq_cst, block) by one block on own memory");
  expect(kCas, static_cast<T>(cas_total), "atomic_cas counter final");

  // add: the olds, sorted, climb from 0 to the final value by the sources' increments.
  {
    std::vector<T> olds;
    for (int s = 0; s < n; ++s)
      if (job.reaches(s, me)) olds.insert(olds.end(), olds_for_me(all_add, s, kSourceThreads),
                                          olds_for_me(all_add, s, kSourceThreads) + kSourceThreads);
    std::sort(olds.begin(), olds.end());
    olds.push_back(final_of(kAdd));
    bool ok = olds.front() == T(0);
    for (std::size_t i = 1; ok && i < olds.size(); ++i)
      ok = std::find(steps.begin(), steps.end(), static_cast<T>(olds[i] - olds[i - 1])) != steps.end();
    CHECK_MSG(ok, t + " atomic_add: the returned old values are not one linear history");
  }
  // xchg: olds + final == initial + every token.
  {
    std::vector<T> seen{final_of(kXchg)}, given{T(0)};
    for (int s = 0; s < n; ++s) {
      if (!job.reaches(s, me)) continue;
      seen.insert(seen.end(), olds_for_me(all_xchg, s, kSourceThreads),
                  olds_for_me(all_xchg, s, kSourceThreads) + kSourceThreads);
      for (int th = 0; th < kSourceThreads; ++th) given.push_back(token<T>(s, th));
    }
    std::sort(seen.begin(), seen.end());
    std::sort(given.begin(), given.end());
    CHECK_MSG(seen == given, t + " atomic_xchg: old values + final != initial + tokens (a token lost or duplicated)");
  }
  // cas: tickets are exactly 0 .. N-1.
  {
    std::vector<T> got;
    for (int s = 0; s < n; ++s)
      if (job.reaches(s, me)) got.insert(got.end(), olds_for_me(all_tickets, s, kCasSourceThreads),
                                         olds_for_me(all_tickets, s, kCasSourceThreads) + kCasSourceThreads);
    std::sort(got.begin(), got.end());
    bool ok = static_cast<long long>(got.size()) == cas_total;
    for (std::size_t i = 0; ok && i < got.size(); ++i) ok = got[i] == static_cast<T>(i);
    CHECK_MSG(ok, t + " atomic_cas: tickets are not exactly 0.." + std::to_string(cas_total - 1));
  }
  job.sync();
  APERTURE_CUDA_CHECK(cudaFree(olds_add), "test");
  APERTURE_CUDA_CHECK(cudaFree(olds_xchg), "test");
  APERTURE_CUDA_CHECK(cudaFree(tickets), "test");
  provider.free(cells_alloc);
}

}  // namespace

TEST(GpuAtomic, Int32) { atomics_for_type<std::int32_t>(gputest::job()); }
TEST(GpuAtomic, Uint32) { atomics_for_type<std::uint32_t>(gputest::job()); }
TEST(GpuAtomic, Int64) { atomics_for_type<std::int64_t>(gputest::job()); }
TEST(GpuAtomic, Uint64) { atomics_for_type<std::uint64_t>(gputest::job()); }
TEST(GpuAtomic, Float) { atomics_for_type<float>(gputest::job()); }
TEST(GpuAtomic, Double) { atomics_for_type<double>(gputest::job()); }

int main(int argc, char** argv) {
  return gputest::run_tests(argc, argv, "gpu_atomic_test", [] { return gputest::start("gpu_atomic_test"); });
}
