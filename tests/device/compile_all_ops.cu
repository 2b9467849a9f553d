// tests/device/compile_all_ops.cu — every device operation, instantiated and checked.
//
// One APERTURE_HD function, exercise<T>(), calls every operation of the contract (translate,
// load, store, put, get, copy, every atomic with every order and scope, signal,
// signal_translated, wait_until_ge, wait_until_ge_for, and the PeerView methods) for int32_t, uint32_t, int64_t, uint64_t, float
// and double, and checks each result. exercise_coop<Coop, T>() does the same for every
// group-cooperative operation (aperture/coop_rma.h: copy, put, get, the ranked copy, signal,
// wait_until_ge_for) and the Coop members, with every Coop type: CoopHost on the host;
// CoopThread, CoopWarp, CoopBlock and CoopGrid in kernels. It runs:
//   - on the host, always (the nvcc-compiled host paths: cuda::atomic_ref on host memory);
//   - in a kernel, when a GPU is present; without one the program says so and exits 0, so CI
//     machines without a GPU still prove the device code compiles for sm_90.
//
// The table describes two pretend ranks inside one process: rank 0's copy is regions[0] and
// rank 1's is regions[1]. Every operation is issued by rank 0 towards rank 1, so a translation
// that ignored the table, or the offset, would read or write the wrong region and be caught.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include <cuda_runtime.h>

#include <aperture/aperture.h>
#include <aperture/coop.h>
#include <aperture/coop_rma.h>

namespace {

constexpr int kElements = 64;

template <class T>
struct Region {
  T data[kElements];
  T src[kElements];
  T dst[kElements];
  T atom;
  std::uint64_t flag;
};

struct Report {
  int failures;
  int first_line;
  int checks;
};

#define CHECK(cond)                                     \
  do {                                                  \
    ++report->checks;                                   \
    if (!(cond)) {                                      \
      if (report->failures++ == 0) report->first_line = __LINE__; \
    }                                                   \
  } while (0)
// A check made by thread 0 of a group only (Report is not atomic).
#define CHECK_ONE(coop, cond)              \
  do {                                     \
    const bool check_one_ok = (cond);      \
    if ((coop).thread_rank() == 0) CHECK(check_one_ok); \
  } while (0)

template <class T>
APERTURE_HD T value_of(int rank, int i) {
  return static_cast<T>(1 + rank * 1000 + i);  // distinct per rank and element; exact in float
}

// Every order and scope, by index (a constexpr array would not be visible in device code).
APERTURE_HD aperture::order order_at(int i) {
  switch (i) {
    case 0: return aperture::order::relaxed;
    case 1: return aperture::order::acquire;
    case 2: return aperture::order::release;
    case 3: return aperture::order::acq_rel;
    default: return aperture::order::seq_cst;
  }
}
APERTURE_HD aperture::scope scope_at(int i) {
  return i == 0 ? aperture::scope::block : i == 1 ? aperture::scope::device : aperture::scope::system;
}

// Every atomic, with an explicit order and scope, on rank 1's `atom` through rank 0's pointer.
// `expected` tracks what rank 1's atom holds.
template <class T>
APERTURE_HD void exercise_atomics(Region<T>* r, const std::int64_t* table, aperture::order o, aperture::scope s,
                                  T& expected, Report* report) {
  using namespace aperture;
  T* p = &r[0].atom;
  CHECK(atomic_xchg(p, T(10), 0, 1, table, o, s) == expected);
  expected = T(10);
  CHECK(atomic_add(p, T(5), 0, 1, table, o, s) == T(10));
  CHECK(atomic_sub(p, T(3), 0, 1, table, o, s) == T(15));
  CHECK(atomic_min(p, T(7), 0, 1, table, o, s) == T(12));
  CHECK(atomic_min(p, T(9), 0, 1, table, o, s) == T(7));
  CHECK(atomic_max(p, T(20), 0, 1, table, o, s) == T(7));
  CHECK(atomic_max(p, T(1), 0, 1, table, o, s) == T(20));
  CHECK(atomic_cas(p, T(20), T(4), 0, 1, table, o, s) == T(20));  // swaps
  CHECK(atomic_cas(p, T(99), T(5), 0, 1, table, o, s) == T(4));   // does not
  expected = T(4);
  if constexpr (std::is_integral_v<T>) {
    CHECK(atomic_or(p, T(3), 0, 1, table, o, s) == T(4));   // 4 | 3 = 7
    CHECK(atomic_and(p, T(5), 0, 1, table, o, s) == T(7));  // 7 & 5 = 5
    CHECK(atomic_xor(p, T(6), 0, 1, table, o, s) == T(5));  // 5 ^ 6 = 3
    expected = T(3);
  }
  CHECK(r[1].atom == expected);
  CHECK(r[0].atom == T(0));  // the caller's own copy is never touched
}

// The same defaults the contract promises (acq_rel, system), called without order and scope.
template <class T>
APERTURE_HD void exercise_default_atomics(Region<T>* r, const std::int64_t* table, Report* report) {
  using namespace aperture;
  T* p = &r[0].atom;
  const T before = r[1].atom;
  CHECK(atomic_xchg(p, T(2), 0, 1, table) == before);
  CHECK(atomic_add(p, T(2), 0, 1, table) == T(2));
  CHECK(atomic_sub(p, T(1), 0, 1, table) == T(4));
  CHECK(atomic_min(p, T(1), 0, 1, table) == T(3));
  CHECK(atomic_max(p, T(8), 0, 1, table) == T(1));
  CHECK(atomic_cas(p, T(8), T(6), 0, 1, table) == T(8));
  if constexpr (std::is_integral_v<T>) {
    CHECK(atomic_or(p, T(1), 0, 1, table) == T(6));   // 7
    CHECK(atomic_and(p, T(3), 0, 1, table) == T(7));  // 3
    CHECK(atomic_xor(p, T(1), 0, 1, table) == T(3));  // 2
    CHECK(r[1].atom == T(2));
  } else {
    CHECK(r[1].atom == T(6));
  }
}

template <class T>
APERTURE_HD void exercise(Region<T>* r, const std::int64_t* table, Report* report) {
  using namespace aperture;
  static_assert(std::is_trivially_copyable_v<PeerView>);

  // Each rank's copy starts with its own values.
  for (int rank = 0; rank < 2; ++rank) {
    for (int i = 0; i < kElements; ++i) {
      r[rank].data[i] = T(0);
      r[rank].src[i] = value_of<T>(rank, i);
      r[rank].dst[i] = T(0);
    }
    r[rank].atom = T(0);
    r[rank].flag = 0;
  }

  // translate: same offset, other region; from_rank == to_rank is the identity.
  for (int i = 0; i < kElements; ++i) {
    CHECK(translate(&r[0].data[i], 0, 1, table) == &r[1].data[i]);
    CHECK(translate(&r[1].src[i], 1, 0, table) == &r[0].src[i]);
    CHECK(translate(&r[0].data[i], 0, 0, table) == &r[0].data[i]);
    const T* const_ptr = &r[0].src[i];
    CHECK(translate(const_ptr, 0, 1, table) == &r[1].src[i]);
  }

  // store / load
  for (int i = 0; i < kElements; ++i) store(&r[0].data[i], value_of<T>(7, i), 0, 1, table);
  for (int i = 0; i < kElements; ++i) {
    CHECK(r[1].data[i] == value_of<T>(7, i));
    CHECK(r[0].data[i] == T(0));
    CHECK(load(&r[0].src[i], 0, 1, table) == value_of<T>(1, i));
    CHECK(load(static_cast<const T*>(&r[0].src[i]), 0, 0, table) == value_of<T>(0, i));
  }

  // put: rank 0's src -> rank 1's dst, from the middle of the buffer (a view) to the end.
  put(&r[0].dst[8], &r[0].src[8], kElements - 8, 0, 1, table);
  for (int i = 0; i < kElements; ++i) CHECK(r[1].dst[i] == (i < 8 ? T(0) : value_of<T>(0, i)));
  // get: rank 1's src -> rank 0's dst.
  get(&r[0].dst[0], &r[0].src[0], kElements, 0, 1, table);
  for (int i = 0; i < kElements; ++i) CHECK(r[0].dst[i] == value_of<T>(1, i));
  // copy between two ranks, neither of them the caller's own copy being read: src on 1, dst on 1.
  copy(&r[0].data[0], &r[0].src[0], kElements, /*src_rank=*/1, /*dst_rank=*/1, /*cur_rank=*/0, table);
  for (int i = 0; i < kElements; ++i) CHECK(r[1].data[i] == value_of<T>(1, i));
  // copy from the caller (rank 0) into rank 1, and back.
  copy(&r[0].dst[0], &r[0].src[0], kElements / 2, 0, 1, 0, table);
  for (int i = 0; i < kElements / 2; ++i) CHECK(r[1].dst[i] == value_of<T>(0, i));
  copy(&r[0].data[0], &r[0].dst[0], kElements, 1, 0, 0, table);
  for (int i = 0; i < kElements; ++i) CHECK(r[0].data[i] == r[1].dst[i]);
  put(&r[0].dst[0], &r[0].src[0], 0, 0, 1, table);  // count 0 does nothing

  // atomics: every order x scope, then the defaults.
  T expected = T(0);
  for (int o = 0; o < 5; ++o)
    for (int s = 0; s < 3; ++s) exercise_atomics(r, table, order_at(o), scope_at(s), expected, report);
  exercise_default_atomics(r, table, report);

  // signal / wait: rank 0 signals rank 1's flag; rank 1 waits on its own copy.
  signal(&r[0].flag, 5, 0, 1, table);
  CHECK(r[1].flag == 5u);
  CHECK(r[0].flag == 0u);
  CHECK(wait_until_ge(&r[1].flag, 5) == 5u);
  CHECK(wait_until_ge(&r[1].flag, 3) == 5u);
  std::uint64_t seen = 0;
  CHECK(wait_until_ge_for(&r[1].flag, 4, 1000, &seen));
  CHECK(seen == 5u);
  seen = 0;
  CHECK(!wait_until_ge_for(&r[1].flag, 6, 2000, &seen));  // times out: nobody signals 6
  CHECK(seen == 5u);
  CHECK(wait_until_ge_for(&r[1].flag, 1, 1000, nullptr));
  // signal_translated: the same store into a flag translated beforehand.
  signal_translated(translate(&r[0].flag, 0, 1, table), 7);
  CHECK(r[1].flag == 7u);
  CHECK(r[0].flag == 0u);

  // PeerView: the same operations with from_rank filled in.
  const PeerView view{0, 2, table};
  CHECK(view.is_direct(0) && view.is_direct(1));
  CHECK(!view.is_direct(2) && !view.is_direct(-1));
  CHECK(view.translate(&r[0].src[3], 1) == &r[1].src[3]);
  view.store(&r[0].data[3], value_of<T>(9, 3), 1);
  CHECK(r[1].data[3] == value_of<T>(9, 3));
  CHECK(view.load(&r[0].data[3], 1) == value_of<T>(9, 3));
  view.put(&r[0].dst[0], &r[0].src[0], kElements, 1);
  for (int i = 0; i < kElements; ++i) CHECK(r[1].dst[i] == value_of<T>(0, i));
  view.get(&r[0].data[0], &r[0].src[0], kElements, 1);
  for (int i = 0; i < kElements; ++i) CHECK(r[0].data[i] == value_of<T>(1, i));
  view.copy(&r[0].dst[0], &r[0].src[0], kElements, /*src_rank=*/1, /*dst_rank=*/0);
  for (int i = 0; i < kElements; ++i) CHECK(r[0].dst[i] == value_of<T>(1, i));
  const T before = r[1].atom;
  CHECK(view.atomic_add(&r[0].atom, T(1), 1) == before);
  CHECK(view.atomic_add(&r[0].atom, T(1), 1, order::relaxed, scope::device) == T(before + T(1)));
  CHECK(view.atomic_cas(&r[0].atom, T(before + T(2)), T(42), 1) == T(before + T(2)));
  CHECK(view.atomic_cas(&r[0].atom, T(0), T(1), 1, order::seq_cst, scope::block) == T(42));
  CHECK(r[1].atom == T(42));
  view.signal(&r[0].flag, 9, 1);
  CHECK(wait_until_ge(&r[1].flag, 9) == 9u);
}


// --- group-cooperative operations ------------------------------------------------------------
// Every thread of `coop` calls these with the same arguments; checks are made by one thread
// after the group (or, for CoopGrid, the one block the test launches) has synchronised.

// Rank 0's and rank 1's copies start from their own values again; flags at 0. One thread.
template <class T>
APERTURE_HD void reset(Region<T>* r) {
  for (int rank = 0; rank < 2; ++rank) {
    for (int i = 0; i < kElements; ++i) {
      r[rank].data[i] = T(0);
      r[rank].src[i] = value_of<T>(rank, i);
      r[rank].dst[i] = T(0);
    }
    r[rank].flag = 0;
  }
}

// The moves, by every thread of the group. Offsets of one element leave the 16-byte vectors of
// the GPU path with heads and tails (src and dst misaligned alike).
template <class Coop, class T>
APERTURE_HD void coop_moves(const Coop& coop, Region<T>* r, const std::int64_t* table) {
  aperture::put(coop, &r[0].dst[1], &r[0].src[1], kElements - 1, 0, 1, table);  // rank 0's src -> rank 1's dst
  aperture::get(coop, &r[0].data[0], &r[0].src[0], kElements, 0, 1, table);     // rank 1's src -> rank 0's data
  aperture::copy(coop, &r[1].data[1], &r[1].src[1], kElements - 2);              // local: rank 1's src -> its data
  // ranked: rank 1's src -> rank 0's dst, pointers given in rank 0's space
  aperture::copy(coop, &r[0].dst[0], &r[0].src[0], kElements, /*src_rank=*/1, /*dst_rank=*/0, /*cur_rank=*/0, table);
  aperture::put(coop, &r[0].dst[0], &r[0].src[0], 0, 0, 1, table);  // count 0 does nothing
}

// One thread, after the moves.
template <class T>
APERTURE_HD void check_moves(const Region<T>* r, Report* report) {
  for (int i = 0; i < kElements; ++i) {
    CHECK(r[1].dst[i] == (i < 1 ? T(0) : value_of<T>(0, i)));
    CHECK(r[0].data[i] == value_of<T>(1, i));
    CHECK(r[1].data[i] == (i < 1 || i >= kElements - 1 ? T(0) : value_of<T>(1, i)));
    CHECK(r[0].dst[i] == value_of<T>(1, i));
    CHECK(r[0].src[i] == value_of<T>(0, i));  // sources untouched
    CHECK(r[1].src[i] == value_of<T>(1, i));
  }
}

// The members every Coop has, checked by one thread of it.
template <class Coop>
APERTURE_HD void check_shape(const Coop& coop, Report* report) {
  CHECK(coop.thread_rank() < coop.size());
  CHECK(coop.num_threads() == coop.size());
}

// signal, the group wait, all(), sync() and the meta group: every thread of a Coop that syncs.
// `give_up`: whether a wait for a value nobody signals is tried (it returns false on a GPU; a
// CoopHost throws instead, which run_coop_on_host checks).
template <class Coop, class T>
APERTURE_HD void coop_signal_wait(const Coop& coop, Region<T>* r, const std::int64_t* table, Report* report,
                                  bool give_up) {
  CHECK_ONE(coop, coop.meta_group_rank() < coop.meta_group_size());
  aperture::signal(coop, &r[0].flag, 5, 0, 1, table);  // into rank 1's flag
  const bool arrived = aperture::wait_until_ge_for(coop, &r[1].flag, 5, 1000000000ull);
  CHECK_ONE(coop, arrived && r[1].flag == 5u && r[0].flag == 0u);
  if (give_up) {
    const bool late = aperture::wait_until_ge_for(coop, &r[1].flag, 6, 2000);
    CHECK_ONE(coop, !late);
  }
  const bool everyone = coop.all(true);
  const bool not_thread_0 = coop.all(coop.thread_rank() != 0);
  CHECK_ONE(coop, everyone && !not_thread_0);
  coop.sync();
}
#undef CHECK_ONE
#undef CHECK

template <class T>
__global__ void exercise_kernel(Region<T>* regions, const std::int64_t* table, Report* report) {
  if (blockIdx.x == 0 && threadIdx.x == 0) exercise(regions, table, report);
}

// One kernel per Coop type, launched as one block (so the checks may follow a __syncthreads,
// CoopGrid included): CoopThread on 1 thread, CoopWarp on one warp, CoopBlock and CoopGrid on 96.
template <class Coop, class T>
__global__ void coop_kernel(Region<T>* r, const std::int64_t* table, Report* report) {
  const Coop coop;
  if (threadIdx.x == 0) reset(r);
  __syncthreads();
  coop_moves(coop, r, table);
  __syncthreads();
  if (threadIdx.x == 0) {
    check_moves(r, report);
    check_shape(coop, report);
    reset(r);
  }
  __syncthreads();
  if constexpr (aperture::can_sync_v<Coop>) coop_signal_wait(coop, r, table, report, /*give_up=*/true);
}

// The host's Coop: the same moves and checks, and a wait that gives up throws aperture::Error.
template <class T>
int run_coop_on_host(const char* type_name) {
  Region<T> regions[2];
  const std::int64_t table[2] = {static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(&regions[0])),
                                 static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(&regions[1]))};
  Report report_value{0, 0, 0};
  Report* report = &report_value;
  const aperture::CoopHost coop;
  static_assert(aperture::is_coop_v<aperture::CoopHost> && aperture::can_sync_v<aperture::CoopHost>);
  reset(regions);
  coop_moves(coop, regions, table);
  check_moves(regions, report);
  check_shape(coop, report);
  reset(regions);
  coop_signal_wait(coop, regions, table, report, /*give_up=*/false);
  const aperture::CoopHost impatient{/*spins=*/4};
  bool threw = false;
  try {
    aperture::wait_until_ge_for(impatient, &regions[1].flag, 6, 2000000);  // 2 ms; nobody signals 6
  } catch (const aperture::Error&) {
    threw = true;
  }
  ++report->checks;
  if (!threw && report->failures++ == 0) report->first_line = __LINE__;
  std::printf("host   %-8s CoopHost: %d checks, %d failed%s", type_name, report->checks, report->failures,
              report->failures ? "" : "\n");
  if (report->failures) std::printf(" (first at line %d)\n", report->first_line);
  return report->failures ? 1 : 0;
}

template <class T>
int run_on_host(const char* type_name) {
  Region<T> regions[2];
  const std::int64_t table[2] = {static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(&regions[0])),
                                 static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(&regions[1]))};
  Report report{0, 0, 0};
  exercise(regions, table, &report);
  std::printf("host   %-8s %d checks, %d failed%s", type_name, report.checks, report.failures,
              report.failures ? "" : "\n");
  if (report.failures) std::printf(" (first at line %d)\n", report.first_line);
  return report.failures ? 1 : 0;
}

bool cuda_ok(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return true;
  std::fprintf(stderr, "%s failed: %s\n", call, cudaGetErrorString(status));
  return false;
}

template <class T>
int run_on_device(const char* type_name) {
  Region<T>* regions = nullptr;
  std::int64_t* table = nullptr;
  Report* report = nullptr;
  if (!cuda_ok(cudaMalloc(&regions, 2 * sizeof(Region<T>)), "cudaMalloc(regions)") ||
      !cuda_ok(cudaMalloc(&table, 2 * sizeof(std::int64_t)), "cudaMalloc(table)") ||
      !cuda_ok(cudaMalloc(&report, sizeof(Report)), "cudaMalloc(report)"))
    return 1;
  const std::int64_t host_table[2] = {static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(&regions[0])),
                                      static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(&regions[1]))};
  Report host_report{0, 0, 0};
  int rc = 0;
  if (!cuda_ok(cudaMemcpy(table, host_table, sizeof host_table, cudaMemcpyHostToDevice), "cudaMemcpy(table)") ||
      !cuda_ok(cudaMemcpy(report, &host_report, sizeof host_report, cudaMemcpyHostToDevice), "cudaMemcpy(report)")) {
    rc = 1;
  } else {
    exercise_kernel<T><<<1, 1>>>(regions, table, report);
    coop_kernel<aperture::CoopThread, T><<<1, 1>>>(regions, table, report);
    coop_kernel<aperture::CoopWarp, T><<<1, 32>>>(regions, table, report);
    coop_kernel<aperture::CoopBlock, T><<<1, 96>>>(regions, table, report);
    coop_kernel<aperture::CoopGrid, T><<<1, 96>>>(regions, table, report);
    if (!cuda_ok(cudaGetLastError(), "launch exercise_kernel and coop_kernel") ||
        !cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize") ||
        !cuda_ok(cudaMemcpy(&host_report, report, sizeof host_report, cudaMemcpyDeviceToHost), "cudaMemcpy(report back)")) {
      rc = 1;
    } else {
      std::printf("device %-8s %d checks, %d failed%s", type_name, host_report.checks, host_report.failures,
                  host_report.failures ? "" : "\n");
      if (host_report.failures) std::printf(" (first at line %d)\n", host_report.first_line);
      rc = host_report.failures ? 1 : 0;
    }
  }
  cudaFree(regions);
  cudaFree(table);
  cudaFree(report);
  return rc;
}

}  // namespace

int main() {
  int failed = 0;
  failed += run_on_host<std::int32_t>("int32_t");
  failed += run_on_host<std::uint32_t>("uint32_t");
  failed += run_on_host<std::int64_t>("int64_t");
  failed += run_on_host<std::uint64_t>("uint64_t");
  failed += run_on_host<float>("float");
  failed += run_on_host<double>("double");
  failed += run_coop_on_host<std::int32_t>("int32_t");
  failed += run_coop_on_host<std::uint64_t>("uint64_t");
  failed += run_coop_on_host<float>("float");
  failed += run_coop_on_host<double>("double");

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("compiled for sm_90; no GPU here\n");
    return failed ? 1 : 0;
  }
  failed += run_on_device<std::int32_t>("int32_t");
  failed += run_on_device<std::uint32_t>("uint32_t");
  failed += run_on_device<std::int64_t>("int64_t");
  failed += run_on_device<std::uint64_t>("uint64_t");
  failed += run_on_device<float>("float");
  failed += run_on_device<double>("double");
  std::printf("%s\n", failed ? "FAILED" : "all device operations passed");
  return failed ? 1 : 0;
}
