// The collectives on GPU memory (the cuda-ipc provider; APERTURE_GPU_PROVIDER picks another):
// barrier, broadcast, all-gather, reduce-scatter, all-reduce (one-shot, two-shot, ll, automatic),
// all-to-all, for float, __half, __nv_bfloat16 and int32, sum/min/max, in place and not, with
// the default staging and a tiny one (many pieces, many blocks), and with the push (LL) path
// always and never; LL calls of changing sizes launched back to back (the epoch halves reused
// many times without the host in between) and replayed from a CUDA graph; a CUDA graph
// replaying a captured all-reduce; the zero-copy forms on symmetric inputs (broadcast's refusal of
// an `out` overlapping root's `in` too); aperture::put by a
// CoopBlock and by CoopWarps at odd offsets; every element type NCCL has with every reduction (sum, prod, min, max, avg),
// against element_reference.h. Every element is checked on the host against values computed
// there from one seed drawn by rank 0. Ranks may share one GPU (gpu-check runs 1, 2 and 3).
//
// A plain program (the GPU machine may lack GoogleTest), run as ranks of a job:
//     aperture launch -n 2 -- gpu_collectives_test
// Prints "SKIP: <reason>" and exits 77 without a GPU; prints "PASS gpu_collectives_test: N
// checks" or "FAIL ..." and exits 0 or 1.
#include <cuda_runtime.h>

#include <aperture/aperture.h>
#include <aperture/collectives/collectives.h>
#include <aperture/collectives/detail/tuning.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/test_seed.h"
#include "element_reference.h"

namespace {

using aperture::AllReduceAlgorithm;
using aperture::Communicator;
using aperture::ReduceOp;

constexpr int kSkip = 77;

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw aperture::Error(aperture::ErrorCode::system,
                          std::string(call) + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}
#define CUDA(call) check_cuda((call), #call)

using test::mix;

std::uint64_t g_seed = 0;
int g_rank = 0, g_world = 1;
long long g_checks = 0, g_failures = 0;

// Rank `rank`'s element i of buffer `salt`. 16-bit floats get values with few mantissa bits.
template <class T>
T value(int rank, std::uint64_t salt, std::uint64_t i) {
  const std::uint64_t h = test::draw(g_seed, rank, salt, i);
  const double unit = static_cast<double>(h >> 11) * 0x1.0p-53 * 2.0 - 1.0;  // [-1, 1)
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(static_cast<float>(unit));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(unit));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(unit);
  } else {
    return static_cast<T>(static_cast<std::int64_t>(h % 2000001) - 1000000);
  }
}

template <class T>
float to_float(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return static_cast<float>(v);
}

// Folded in rank order at the type's width, by the independent reference (element_reference.h).
template <class T>
T folded(ReduceOp op, std::uint64_t salt, std::uint64_t i) {
  std::vector<std::uint64_t> inputs(static_cast<std::size_t>(g_world));
  for (int r = 0; r < g_world; ++r) {
    const T v = value<T>(r, salt, i);
    std::memcpy(&inputs[static_cast<std::size_t>(r)], &v, sizeof v);
  }
  const std::uint64_t bits = reference::fold(aperture::data_type_of_v<T>, op, inputs);
  T out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

template <class T>
bool same(const T& a, const T& b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }

// Checks a whole buffer; prints the first wrong element of it.
template <class T, class Expected>
void expect_all(const std::vector<T>& got, std::uint64_t n, Expected expected, const std::string& what) {
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const T e = expected(i);
    if (!same(got[i], e) && wrong++ == 0 && g_failures < 20)
      std::fprintf(stderr, "rank %d: %s: element %" PRIu64 " is %g, expected %g\n", g_rank, what.c_str(), i,
                   static_cast<double>(to_float(got[i])), static_cast<double>(to_float(e)));
  }
  g_checks += static_cast<long long>(n) + 1;
  if (wrong != 0) ++g_failures;
}

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  std::uint64_t n = 0;
  explicit DeviceBuffer(std::uint64_t count) : n(count) { CUDA(cudaMalloc(&ptr, (count ? count : 1) * sizeof(T))); }
  ~DeviceBuffer() { cudaFree(ptr); }
  // The collectives run on a non-blocking stream, which the legacy default stream's copies do
  // not order with: each of these waits until it is done.
  void upload(const std::vector<T>& v) {
    CUDA(cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    CUDA(cudaDeviceSynchronize());
  }
  std::vector<T> download(std::uint64_t count) const {
    std::vector<T> v(count);
    CUDA(cudaMemcpy(v.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  void poison() {
    CUDA(cudaMemset(ptr, 0x7b, (n ? n : 1) * sizeof(T)));
    CUDA(cudaDeviceSynchronize());
  }
};

template <class T>
std::vector<T> input(std::uint64_t salt, std::uint64_t count) {
  std::vector<T> v(count);
  for (std::uint64_t i = 0; i < count; ++i) v[i] = value<T>(g_rank, salt, i);
  return v;
}

std::uint64_t g_salt = 0;
std::uint64_t next_salt() { return ++g_salt * 7919; }

template <class T>
const char* tname() { return aperture::name_of(aperture::data_type_of_v<T>); }

template <class T>
void run_type(Communicator& comm, cudaStream_t stream, const std::vector<std::uint64_t>& counts) {
  const int me = g_rank, n = g_world;
  const std::string half = " half " + std::to_string(comm.options().half_bytes) + " ll_max " +
                           std::to_string(*comm.options().ll_max_bytes);
  for (std::uint64_t count : counts) {
    for (bool in_place : {false, true}) {
      const std::string suffix = std::string("<") + tname<T>() + "> count " + std::to_string(count) +
                                 (in_place ? " in place" : "") + half;
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max}) {
        for (AllReduceAlgorithm algo : {AllReduceAlgorithm::one_shot, AllReduceAlgorithm::two_shot, AllReduceAlgorithm::ll,
                                        AllReduceAlgorithm::automatic}) {
          const std::uint64_t salt = next_salt();
          DeviceBuffer<T> in(count), out(count);
          in.upload(input<T>(salt, count));
          out.poison();
          T* dst = in_place ? in.ptr : out.ptr;
          comm.all_reduce(in.ptr, dst, count, op, algo, stream);
          comm.check(stream);
          expect_all((in_place ? in : out).download(count), count, [&](std::uint64_t i) { return folded<T>(op, salt, i); },
                     std::string("all_reduce ") + aperture::name_of(op) + " " + aperture::name_of(algo) + suffix);
        }
        {
          const std::uint64_t salt = next_salt();
          DeviceBuffer<T> in(count * n), out(count);
          in.upload(input<T>(salt, count * n));
          out.poison();
          T* dst = in_place ? in.ptr + me * count : out.ptr;
          comm.reduce_scatter(in.ptr, dst, count, op, stream);
          comm.check(stream);
          std::vector<T> got = in_place ? in.download(count * n) : out.download(count);
          if (in_place) got.erase(got.begin(), got.begin() + me * count);
          expect_all(got, count, [&](std::uint64_t i) { return folded<T>(op, salt, me * count + i); },
                     std::string("reduce_scatter ") + aperture::name_of(op) + suffix);
        }
      }
      {
        const std::uint64_t salt = next_salt();
        DeviceBuffer<T> in(count), out(count * n);
        in.upload(input<T>(salt, count));
        out.poison();
        if (in_place) CUDA(cudaMemcpy(out.ptr + me * count, in.ptr, count * sizeof(T), cudaMemcpyDeviceToDevice));
        CUDA(cudaDeviceSynchronize());
        comm.all_gather(in_place ? out.ptr + me * count : in.ptr, out.ptr, count, stream);
        comm.check(stream);
        const std::vector<T> got = out.download(count * n);
        expect_all(got, count * n, [&](std::uint64_t i) { return value<T>(static_cast<int>(i / (count ? count : 1)), salt, i % (count ? count : 1)); },
                   "all_gather" + suffix);
      }
      {
        const std::uint64_t salt = next_salt();
        DeviceBuffer<T> in(count * n), out(count * n);
        in.upload(input<T>(salt, count * n));
        out.poison();
        T* dst = in_place ? in.ptr : out.ptr;
        comm.all_to_all(in.ptr, dst, count, stream);
        comm.check(stream);
        expect_all((in_place ? in : out).download(count * n), count * n,
                   [&](std::uint64_t i) { const std::uint64_t c = count ? count : 1; return value<T>(static_cast<int>(i / c), salt, me * count + i % c); },
                   "all_to_all" + suffix);
      }
      for (int root = 0; root < n; ++root) {
        const std::uint64_t salt = next_salt();
        DeviceBuffer<T> in(count), out(count);
        in.upload(input<T>(salt, count));
        out.poison();
        T* dst = in_place ? in.ptr : out.ptr;
        comm.broadcast(in.ptr, dst, count, root, stream);
        comm.check(stream);
        expect_all((in_place ? in : out).download(count), count, [&](std::uint64_t i) { return value<T>(root, salt, i); },
                   "broadcast root " + std::to_string(root) + suffix);
      }
    }
  }
}

// The zero-copy forms on an input allocated from the provider (symmetric): every count, in place
// (all-gather; the reductions then fall back to the staged path) and not, each call's input
// rewritten right after it returns (the trailing barrier keeps peers from still reading it).
template <class T>
void symmetric_cases(aperture::Provider& provider, Communicator& comm, cudaStream_t stream,
                     const std::vector<std::uint64_t>& counts) {
  const int me = g_rank, n = g_world;
  std::uint64_t most = 1;
  for (std::uint64_t c : counts) most = c > most ? c : most;
  aperture::Allocation a = provider.allocate(most * static_cast<std::uint64_t>(n) * sizeof(T));
  T* sym = a.as<T>();
  const auto upload = [&](const std::vector<T>& v, T* at) {
    CUDA(cudaMemcpy(at, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    CUDA(cudaDeviceSynchronize());
  };
  const auto download = [&](const T* at, std::uint64_t count) {
    std::vector<T> v(count);
    CUDA(cudaMemcpy(v.data(), at, count * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  };
  for (std::uint64_t count : counts)
    for (bool in_place : {false, true}) {
      const std::string suffix = std::string(" symmetric <") + tname<T>() + "> count " + std::to_string(count) +
                                 (in_place ? " in place" : "") + " half " + std::to_string(comm.options().half_bytes);
      {
        const std::uint64_t salt = next_salt();
        DeviceBuffer<T> out(count * n);
        out.poison();
        T* src = in_place ? sym + me * count : sym;
        T* dst = in_place ? sym : out.ptr;
        upload(input<T>(salt, count), src);
        comm.all_gather(src, a.map, dst, count, aperture::data_type_of_v<T>, stream);
        comm.check(stream);
        const std::uint64_t c = count ? count : 1;
        expect_all(download(dst, count * n), count * n,
                   [&](std::uint64_t i) { return value<T>(static_cast<int>(i / c), salt, i % c); }, "all_gather" + suffix);
      }
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
        {
          const std::uint64_t salt = next_salt();
          DeviceBuffer<T> out(count);
          out.poison();
          upload(input<T>(salt, count * n), sym);
          T* dst = in_place ? sym + me * count : out.ptr;
          comm.reduce_scatter(sym, a.map, dst, count, aperture::data_type_of_v<T>, op, stream);
          comm.check(stream);
          expect_all(download(dst, count), count, [&](std::uint64_t i) { return folded<T>(op, salt, me * count + i); },
                     std::string("reduce_scatter ") + aperture::name_of(op) + suffix);
        }
        for (AllReduceAlgorithm algo :
             {AllReduceAlgorithm::one_shot, AllReduceAlgorithm::two_shot, AllReduceAlgorithm::automatic}) {
          const std::uint64_t salt = next_salt();
          DeviceBuffer<T> out(count);
          out.poison();
          upload(input<T>(salt, count), sym);
          T* dst = in_place ? sym : out.ptr;
          comm.all_reduce(sym, a.map, dst, count, aperture::data_type_of_v<T>, op, algo, stream);
          comm.check(stream);
          expect_all(download(dst, count), count, [&](std::uint64_t i) { return folded<T>(op, salt, i); },
                     std::string("all_reduce ") + aperture::name_of(op) + " " + aperture::name_of(algo) + suffix);
        }
      }
      {  // zero-copy from the size the table gives (Options::all_to_all_direct_min_bytes), staged below
        const std::uint64_t salt = next_salt();
        DeviceBuffer<T> out(count * n);
        out.poison();
        upload(input<T>(salt, count * n), sym);
        T* dst = in_place ? sym : out.ptr;
        comm.all_to_all(sym, a.map, dst, count, aperture::data_type_of_v<T>, stream);
        comm.check(stream);
        const std::uint64_t c = count ? count : 1;
        expect_all(download(dst, count * n), count * n,
                   [&](std::uint64_t i) { return value<T>(static_cast<int>(i / c), salt, me * count + i % c); },
                   "all_to_all" + suffix);
      }
      for (int root = 0; root < n; ++root) {  // broadcast: only root's `sym` is read
        const std::uint64_t salt = next_salt();
        DeviceBuffer<T> out(count);
        out.poison();
        comm.barrier(stream);  // every peer has read `sym` before it is rewritten
        comm.check(stream);
        upload(me == root ? input<T>(salt, count) : std::vector<T>(count, T(-5.0f)), sym);
        T* dst = in_place ? sym : out.ptr;
        comm.broadcast(sym, a.map, dst, count, aperture::data_type_of_v<T>, root, stream);
        comm.check(stream);
        expect_all(download(dst, count), count, [&](std::uint64_t i) { return value<T>(root, salt, i); },
                   "broadcast root " + std::to_string(root) + suffix);
      }
    }
  comm.barrier(stream);
  comm.check(stream);
  provider.free(a);
}

// What check() says after a call that every rank must refuse: the message of an invalid_argument
// error, else what happened instead (another error's, marked, or "no error").
std::string refusal_from_check(Communicator& comm, cudaStream_t stream) {
  try {
    comm.check(stream);
  } catch (const aperture::Error& e) {
    if (e.code() == aperture::ErrorCode::invalid_argument) return e.what();
    return std::string("not invalid_argument: ") + e.what();
  }
  return "no error";
}

// A zero-copy broadcast whose root gives an `out` overlapping its `in` (not in place): every
// rank's kernel returns before anything moves, and check() raises the error naming root. On a
// Communicator of its own: the status stays set, as after a wait that gave up.
void broadcast_root_overlaps_case(aperture::Provider& provider, aperture::Team& team, cudaStream_t stream) {
  Communicator::Options zero_copy;
  zero_copy.broadcast_direct_min_bytes = 0;  // the zero-copy path at this size too
  Communicator comm(provider, team, zero_copy);
  constexpr std::uint64_t kCount = 4096;
  aperture::Allocation a = provider.allocate((kCount + 1) * sizeof(float));
  DeviceBuffer<float> out(kCount);
  float* sym = a.as<float>();
  const int root = g_world - 1;
  comm.broadcast(sym, a.map, g_rank == root ? sym + 1 : out.ptr, kCount, aperture::DataType::float32, root, stream);
  const std::string message = refusal_from_check(comm, stream);
  ++g_checks;
  if (message.find("on root " + std::to_string(root) + " `out` overlaps `in`") == std::string::npos) {
    ++g_failures;
    std::printf("FAIL rank %d: broadcast, root's out overlapping its in: check() said \"%s\"\n", g_rank, message.c_str());
  }
  provider.free(a);
}

// A zero-copy all-reduce whose ranks lay out in/out differently (the odd ranks in place): every
// rank's kernel returns at the same barrier, and check() raises the error naming the ranks. On a
// Communicator of its own: the status stays set, as after a wait that gave up.
void layouts_differ_case(aperture::Provider& provider, aperture::Team& team, cudaStream_t stream) {
  if (g_world == 1) return;
  Communicator comm(provider, team);
  constexpr std::uint64_t kCount = 4096;
  aperture::Allocation a = provider.allocate(kCount * sizeof(float));
  DeviceBuffer<float> out(kCount);
  float* sym = a.as<float>();
  comm.all_reduce(sym, a.map, g_rank % 2 == 1 ? sym : out.ptr, kCount, aperture::DataType::float32, ReduceOp::sum,
                  AllReduceAlgorithm::one_shot, stream);
  const std::string message = refusal_from_check(comm, stream);
  ++g_checks;
  if (message.find("on rank(s) 1") == std::string::npos || message.find("on rank(s) 0") == std::string::npos) {
    ++g_failures;
    std::printf("FAIL rank %d: layouts that differ: check() said \"%s\"\n", g_rank, message.c_str());
  }
  provider.free(a);
}

// Zero-copy calls whose ranks pass their symmetric input at different offsets of its allocation
// (the odd ranks one element further in): every rank's kernel returns before anything is written,
// and check() raises the error naming both groups (a broadcast's: those not at root's offset).
// A Communicator per call: the status stays set, as after a wait that gave up.
void offsets_differ_case(aperture::Provider& provider, aperture::Team& team, cudaStream_t stream) {
  if (g_world == 1) return;
  constexpr std::uint64_t kCount = 4096;
  aperture::Allocation a = provider.allocate((kCount + 1) * sizeof(float));
  float* in = a.as<float>() + g_rank % 2;
  const auto group = [](int parity) {
    std::string list;
    for (int r = parity; r < g_world; r += 2) list += (list.empty() ? "" : ", ") + std::to_string(r);
    return list;
  };
  const auto refused = [&](const char* what, int marked_parity, const std::function<void(Communicator&, float*)>& call) {
    Communicator::Options zero_copy;
    zero_copy.broadcast_direct_min_bytes = 0;  // the zero-copy broadcast at this size too
    zero_copy.ll_max_bytes = 0;                // and the zero-copy all-reduce, not the push path
    Communicator comm(provider, team, zero_copy);
    DeviceBuffer<float> out(kCount);
    CUDA(cudaMemset(out.ptr, 0xff, kCount * sizeof(float)));  // NaNs no algorithm writes
    CUDA(cudaDeviceSynchronize());
    call(comm, out.ptr);
    const std::string message = refusal_from_check(comm, stream);
    ++g_checks;
    if (message.find("on rank(s) " + group(marked_parity) + " it lies at another offset than on rank(s) " +
                     group(1 - marked_parity)) == std::string::npos) {
      ++g_failures;
      std::printf("FAIL rank %d: %s at offsets that differ: check() said \"%s\"\n", g_rank, what, message.c_str());
    }
    const std::vector<float> after = out.download(kCount);
    std::uint64_t written = 0;
    for (float x : after) written += std::memcmp(&x, "\xff\xff\xff\xff", 4) != 0;
    ++g_checks;
    if (written != 0) {
      ++g_failures;
      std::printf("FAIL rank %d: %s at offsets that differ wrote %llu of %llu elements before refusing\n", g_rank, what,
                  static_cast<unsigned long long>(written), static_cast<unsigned long long>(kCount));
    }
  };
  refused("one-shot all_reduce", 1, [&](Communicator& comm, float* out) {
    comm.all_reduce(in, a.map, out, kCount, aperture::DataType::float32, ReduceOp::sum, AllReduceAlgorithm::one_shot, stream);
  });
  refused("broadcast from root 1", 0, [&](Communicator& comm, float* out) {
    comm.broadcast(in, a.map, out, kCount, aperture::DataType::float32, 1, stream);
  });
  provider.free(a);
}

// Every element type with every reduction, as raw bits against the independent reference:
// all-reduce (one-shot, two-shot, automatic), reduce-scatter, the zero-copy all-reduce and
// reduce-scatter on a symmetric input, and broadcast / all-gather / all-to-all of any bits.
std::uint64_t bits_of(aperture::DataType t, ReduceOp op, int rank, std::uint64_t salt, std::uint64_t i) {
  return reference::element(t, op, test::draw(g_seed, rank, salt, i));
}

void every_type_cases(aperture::Provider& provider, Communicator& comm, cudaStream_t stream,
                      const std::vector<std::uint64_t>& counts) {
  using aperture::DataType;
  const int me = g_rank, n = g_world;
  std::uint64_t most = 1;
  for (std::uint64_t c : counts) most = c > most ? c : most;
  aperture::Allocation sym = provider.allocate(most * static_cast<std::uint64_t>(n) * 8);
  DeviceBuffer<unsigned char> in(most * n * 8), out(most * n * 8);
  const auto upload = [&](void* at, const std::vector<std::uint64_t>& bits, std::size_t size) {
    std::vector<unsigned char> raw(bits.size() * size);
    for (std::size_t i = 0; i < bits.size(); ++i) std::memcpy(&raw[i * size], &bits[i], size);
    CUDA(cudaMemcpy(at, raw.data(), raw.size(), cudaMemcpyHostToDevice));
    CUDA(cudaDeviceSynchronize());
  };
  const auto check = [&](const void* at, std::uint64_t count, std::size_t size, const std::string& what, auto want) {
    std::vector<unsigned char> raw(count * size);
    CUDA(cudaMemcpy(raw.data(), at, raw.size(), cudaMemcpyDeviceToHost));
    std::vector<std::uint64_t> got(count), expected(count);
    for (std::uint64_t i = 0; i < count; ++i) {
      std::memcpy(&got[i], &raw[i * size], size);
      expected[i] = want(i);
    }
    expect_all(got, count, [&](std::uint64_t i) { return expected[i]; }, what);
  };
  for (DataType t : aperture::kAllDataTypes) {
    const std::size_t size = aperture::size_of(t);
    for (std::uint64_t count : counts) {
      const std::string suffix = std::string(" <") + aperture::name_of(t) + "> count " + std::to_string(count);
      for (ReduceOp op : aperture::kAllReduceOps) {
        const auto inputs = [&](std::uint64_t salt, std::uint64_t elements) {
          std::vector<std::uint64_t> v(elements);
          for (std::uint64_t i = 0; i < elements; ++i) v[i] = bits_of(t, op, me, salt, i);
          return v;
        };
        const auto expected = [&](std::uint64_t salt, std::uint64_t at) {
          std::vector<std::uint64_t> each(static_cast<std::size_t>(n));
          for (int r = 0; r < n; ++r) each[static_cast<std::size_t>(r)] = bits_of(t, op, r, salt, at);
          return reference::fold(t, op, each);
        };
        const std::string what = std::string(" ") + aperture::name_of(op) + suffix;
        for (AllReduceAlgorithm algo : {AllReduceAlgorithm::one_shot, AllReduceAlgorithm::two_shot, AllReduceAlgorithm::automatic}) {
          const std::uint64_t salt = next_salt();
          upload(in.ptr, inputs(salt, count), size);
          out.poison();
          comm.all_reduce(in.ptr, out.ptr, count, t, op, algo, stream);
          comm.check(stream);
          check(out.ptr, count, size, std::string("all_reduce ") + aperture::name_of(algo) + what,
                [&](std::uint64_t i) { return expected(salt, i); });
        }
        {
          const std::uint64_t salt = next_salt();
          upload(in.ptr, inputs(salt, count * n), size);
          out.poison();
          comm.reduce_scatter(in.ptr, out.ptr, count, t, op, stream);
          comm.check(stream);
          check(out.ptr, count, size, "reduce_scatter" + what, [&](std::uint64_t i) { return expected(salt, me * count + i); });
        }
        {
          const std::uint64_t salt = next_salt();
          upload(sym.ptr, inputs(salt, count), size);
          out.poison();
          comm.all_reduce(sym.ptr, sym.map, out.ptr, count, t, op, AllReduceAlgorithm::one_shot, stream);
          comm.check(stream);
          check(out.ptr, count, size, "all_reduce symmetric" + what, [&](std::uint64_t i) { return expected(salt, i); });
        }
        {
          const std::uint64_t salt = next_salt();
          upload(sym.ptr, inputs(salt, count), size);
          out.poison();
          comm.all_reduce(sym.ptr, sym.map, out.ptr, count, t, op, AllReduceAlgorithm::two_shot, stream);
          comm.check(stream);
          check(out.ptr, count, size, "all_reduce two_shot symmetric" + what, [&](std::uint64_t i) { return expected(salt, i); });
        }
        {
          const std::uint64_t salt = next_salt();
          upload(sym.ptr, inputs(salt, count * n), size);
          out.poison();
          comm.reduce_scatter(sym.ptr, sym.map, out.ptr, count, t, op, stream);
          comm.check(stream);
          check(out.ptr, count, size, "reduce_scatter symmetric" + what,
                [&](std::uint64_t i) { return expected(salt, me * count + i); });
        }
      }
      const auto raw = [&](int rank, std::uint64_t salt, std::uint64_t i) {
        return test::draw(g_seed, rank, salt, i) & reference::mask(t);
      };
      const auto raw_inputs = [&](std::uint64_t salt, std::uint64_t elements) {
        std::vector<std::uint64_t> v(elements);
        for (std::uint64_t i = 0; i < elements; ++i) v[i] = raw(me, salt, i);
        return v;
      };
      const std::uint64_t c = count ? count : 1;
      {
        const std::uint64_t salt = next_salt();
        upload(in.ptr, raw_inputs(salt, count), size);
        out.poison();
        comm.broadcast(in.ptr, out.ptr, count, t, n - 1, stream);
        comm.check(stream);
        check(out.ptr, count, size, "broadcast" + suffix, [&](std::uint64_t i) { return raw(n - 1, salt, i); });
      }
      {
        const std::uint64_t salt = next_salt();
        upload(in.ptr, raw_inputs(salt, count), size);
        out.poison();
        comm.all_gather(in.ptr, out.ptr, count, t, stream);
        comm.check(stream);
        check(out.ptr, count * n, size, "all_gather" + suffix,
              [&](std::uint64_t i) { return raw(static_cast<int>(i / c), salt, i % c); });
      }
      {
        const std::uint64_t salt = next_salt();
        upload(in.ptr, raw_inputs(salt, count * n), size);
        out.poison();
        comm.all_to_all(in.ptr, out.ptr, count, t, stream);
        comm.check(stream);
        check(out.ptr, count * n, size, "all_to_all" + suffix,
              [&](std::uint64_t i) { return raw(static_cast<int>(i / c), salt, me * count + i % c); });
      }
      {
        const std::uint64_t salt = next_salt();
        upload(sym.ptr, raw_inputs(salt, count * n), size);
        out.poison();
        comm.all_to_all(sym.ptr, sym.map, out.ptr, count, t, stream);
        comm.check(stream);
        check(out.ptr, count * n, size, "all_to_all symmetric" + suffix,
              [&](std::uint64_t i) { return raw(static_cast<int>(i / c), salt, me * count + i % c); });
      }
    }
  }
  comm.barrier(stream);
  comm.check(stream);
  provider.free(sym);
}

// The tuning table's automatic choices at this rank count (detail/tuning.h): sizes on both sides
// of its LL and one-shot thresholds, the choice compared with the table, each result checked.
// With APERTURE_TEST_PATHS_ONLY=1 this is all the program runs (gpu-check: 4 to 8 ranks sharing
// GPUs, where the whole test would take too long).
void path_cases(Communicator& comm, cudaStream_t stream) {
  namespace tuning = aperture::collectives::tuning;
  const int n = g_world, me = g_rank;
  const std::size_t ll = *comm.options().ll_max_bytes, one_shot = comm.one_shot_max_bytes();
  const auto expect = [&](bool ok, const std::string& what) {
    ++g_checks;
    if (!ok) {
      ++g_failures;
      std::fprintf(stderr, "rank %d: %s\n", me, what.c_str());
    }
  };
  // The LL path's blocks hold 64 x 8 KiB in one piece at the defaults: the table's entry or that.
  expect(ll == std::min(tuning::ll_max_bytes(true, n), std::size_t{64} * 8192),
         "ll_max_bytes " + std::to_string(ll) + " is not the table's for " + std::to_string(n) + " ranks");
  expect(one_shot == tuning::one_shot_max_bytes(true, n),
         "one_shot_max_bytes " + std::to_string(one_shot) + " is not the table's for " + std::to_string(n) + " ranks");
  std::vector<std::size_t> sizes = {4096, ll, ll + 4096, std::size_t{1} << 20, std::size_t{4} << 20};
  if (one_shot != SIZE_MAX) sizes.insert(sizes.end(), {one_shot, one_shot + 4096});
  for (std::size_t bytes : sizes) {
    const std::uint64_t count = bytes / sizeof(float);
    const AllReduceAlgorithm chosen = comm.choose_all_reduce(bytes);
    const AllReduceAlgorithm wanted = comm.uses_ll(bytes)                 ? AllReduceAlgorithm::ll
                                      : n == 1 || bytes <= one_shot       ? AllReduceAlgorithm::one_shot
                                                                          : AllReduceAlgorithm::two_shot;
    const std::string what = " automatic at " + std::to_string(n) + " ranks, " + std::to_string(bytes) + " B (" +
                             aperture::name_of(chosen) + ")";
    expect(chosen == wanted, "choose_all_reduce" + what + ": expected " + aperture::name_of(wanted));
    {
      const std::uint64_t salt = next_salt();
      DeviceBuffer<float> in(count), out(count);
      in.upload(input<float>(salt, count));
      out.poison();
      comm.all_reduce(in.ptr, out.ptr, count, ReduceOp::sum, AllReduceAlgorithm::automatic, stream);
      comm.check(stream);
      expect_all(out.download(count), count, [&](std::uint64_t i) { return folded<float>(ReduceOp::sum, salt, i); },
                 "all_reduce" + what);
    }
    {
      const std::uint64_t salt = next_salt(), each = count / static_cast<std::uint64_t>(n);
      DeviceBuffer<float> in(each), out(each * n);
      in.upload(input<float>(salt, each));
      out.poison();
      comm.all_gather(in.ptr, out.ptr, each, stream);
      comm.check(stream);
      const std::uint64_t c = each ? each : 1;
      expect_all(out.download(each * n), each * n,
                 [&](std::uint64_t i) { return value<float>(static_cast<int>(i / c), salt, i % c); }, "all_gather" + what);
    }
    {
      const std::uint64_t salt = next_salt(), each = bytes / sizeof(__nv_bfloat16) / static_cast<std::uint64_t>(n);
      DeviceBuffer<__nv_bfloat16> in(each * n), out(each);
      in.upload(input<__nv_bfloat16>(salt, each * n));
      out.poison();
      comm.reduce_scatter(in.ptr, out.ptr, each, ReduceOp::sum, stream);
      comm.check(stream);
      expect_all(out.download(each), each,
                 [&](std::uint64_t i) { return folded<__nv_bfloat16>(ReduceOp::sum, salt, me * each + i); },
                 "reduce_scatter bf16" + what);
    }
  }
}

// A captured all-reduce replayed with new input each time: the epochs live on the GPU.
void graph_replay(Communicator& comm, cudaStream_t stream) {
  constexpr std::uint64_t kCount = 100003;
  DeviceBuffer<float> in(kCount), out(kCount);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  comm.all_reduce(in.ptr, out.ptr, kCount, ReduceOp::sum, AllReduceAlgorithm::automatic, stream);
  comm.barrier(stream);
  comm.all_reduce(in.ptr, in.ptr, kCount, ReduceOp::max, AllReduceAlgorithm::one_shot, stream);
  CUDA(cudaStreamEndCapture(stream, &graph));
  CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 10; ++replay) {
    const std::uint64_t salt = next_salt();
    in.upload(input<float>(salt, kCount));
    CUDA(cudaGraphLaunch(exec, stream));
    comm.check(stream);
    expect_all(out.download(kCount), kCount, [&](std::uint64_t i) { return folded<float>(ReduceOp::sum, salt, i); },
               "graph replay " + std::to_string(replay) + " all_reduce sum");
    expect_all(in.download(kCount), kCount, [&](std::uint64_t i) { return folded<float>(ReduceOp::max, salt, i); },
               "graph replay " + std::to_string(replay) + " all_reduce max in place");
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// Two LL all-reduces in a row in one kernel of ours, many rounds, each round on new data: the
// view from Communicator::collective_view() makes each call fence after its last piece (detail/ll.h),
// so no round's lines land in a half a peer has not cleared yet.
__global__ void two_ll_per_kernel(aperture::collectives::CollectiveHandle h, const float* a, float* out_a,
                                  const float* b, float* out_b, std::uint64_t count, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    const std::uint64_t at = static_cast<std::uint64_t>(r) * count;
    aperture::collectives::all_reduce_ll<ReduceOp::sum>(aperture::CoopBlock{}, h, a + at, out_a + at, count);
    aperture::collectives::all_reduce_ll<ReduceOp::max>(aperture::CoopBlock{}, h, b + at, out_b + at, count);
  }
}

void two_ll_in_one_kernel(Communicator& comm, cudaStream_t stream) {
  constexpr int kRounds = 50;
  for (std::uint64_t count : {std::uint64_t{3}, std::uint64_t{1000}, std::uint64_t{20000}}) {
    const std::uint64_t sa = next_salt(), sb = next_salt();
    DeviceBuffer<float> a(count * kRounds), b(count * kRounds), out_a(count * kRounds), out_b(count * kRounds);
    a.upload(input<float>(sa, count * kRounds));
    b.upload(input<float>(sb, count * kRounds));
    out_a.poison();
    out_b.poison();
    const int blocks = count > 1000 ? 4 : 1;
    two_ll_per_kernel<<<blocks, 256, 0, stream>>>(comm.collective_view(), a.ptr, out_a.ptr, b.ptr, out_b.ptr, count, kRounds);
    CUDA(cudaGetLastError());
    comm.check(stream);
    const std::string what = " two LL all-reduces per kernel, count " + std::to_string(count);
    expect_all(out_a.download(count * kRounds), count * kRounds,
               [&](std::uint64_t i) { return folded<float>(ReduceOp::sum, sa, i); }, "sum" + what);
    expect_all(out_b.download(count * kRounds), count * kRounds,
               [&](std::uint64_t i) { return folded<float>(ReduceOp::max, sb, i); }, "max" + what);
  }
}

// Push (LL) calls of changing sizes, all launched back to back on the stream before any is
// checked, so ranks run ahead of each other and every epoch half is reused by calls larger and
// smaller than the last (a line left from an earlier call would show as a wrong element here);
// staged all-reduces are mixed in (they share the epochs). Then the same sequence captured once
// in a CUDA graph and replayed with new inputs.
void ll_back_to_back(Communicator& comm, cudaStream_t stream) {
  const std::vector<std::uint64_t> sizes = {1, 70001, 3, 2048, 17, 0, 1000, 65536, 5, 20003, 2, 333, 4097, 131072};
  constexpr int kCalls = 140;
  const int n = g_world, me = g_rank;
  struct Case {
    int kind;
    std::uint64_t count;
    std::uint64_t salt;
    std::unique_ptr<DeviceBuffer<float>> in, out;
  };
  std::vector<Case> cases;
  for (int call = 0; call < kCalls; ++call) {
    Case c;
    c.kind = call % 7 == 6 ? 3 : call % 3;  // 0 all_reduce ll, 1 all_gather, 2 reduce_scatter, 3 all_reduce staged
    c.count = sizes[static_cast<std::size_t>(call * 5) % sizes.size()];
    const std::uint64_t in_n = c.kind == 2 ? c.count * n : c.count;
    const std::uint64_t out_n = c.kind == 1 ? c.count * n : c.count;
    c.in = std::make_unique<DeviceBuffer<float>>(in_n);
    c.out = std::make_unique<DeviceBuffer<float>>(out_n);
    cases.push_back(std::move(c));
  }
  const auto launch = [&] {
    for (int call = 0; call < kCalls; ++call) {
      Case& c = cases[call];
      switch (c.kind) {
        case 0: comm.all_reduce(c.in->ptr, c.out->ptr, c.count, ReduceOp::sum, AllReduceAlgorithm::ll, stream); break;
        case 1: comm.all_gather(c.in->ptr, c.out->ptr, c.count, stream); break;
        case 2: comm.reduce_scatter(c.in->ptr, c.out->ptr, c.count, ReduceOp::max, stream); break;
        default:
          comm.all_reduce(c.in->ptr, c.out->ptr, c.count, ReduceOp::min,
                          call % 2 ? AllReduceAlgorithm::two_shot : AllReduceAlgorithm::one_shot, stream);
      }
    }
  };
  const auto prepare = [&] {
    for (Case& c : cases) {
      c.salt = next_salt();
      c.in->upload(input<float>(c.salt, c.in->n));
      c.out->poison();
    }
  };
  const auto verify = [&](const std::string& how) {
    for (int call = 0; call < kCalls; ++call) {
      Case& c = cases[call];
      const std::string what = how + " call " + std::to_string(call) + " count " + std::to_string(c.count);
      const std::vector<float> got = c.out->download(c.out->n);
      switch (c.kind) {
        case 0:
          expect_all(got, c.count, [&](std::uint64_t i) { return folded<float>(ReduceOp::sum, c.salt, i); }, "all_reduce ll" + what);
          break;
        case 1:
          expect_all(got, c.count * n, [&](std::uint64_t i) { return value<float>(static_cast<int>(i / c.count), c.salt, i % c.count); },
                     "all_gather" + what);
          break;
        case 2:
          expect_all(got, c.count, [&](std::uint64_t i) { return folded<float>(ReduceOp::max, c.salt, me * c.count + i); },
                     "reduce_scatter" + what);
          break;
        default:
          expect_all(got, c.count, [&](std::uint64_t i) { return folded<float>(ReduceOp::min, c.salt, i); }, "all_reduce staged" + what);
      }
    }
  };
  for (int round = 0; round < 2; ++round) {
    prepare();
    launch();
    comm.check(stream);
    verify(" back to back round " + std::to_string(round));
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  launch();
  CUDA(cudaStreamEndCapture(stream, &graph));
  CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    prepare();
    CUDA(cudaGraphLaunch(exec, stream));
    comm.check(stream);
    verify(" graph replay " + std::to_string(replay));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// aperture::put by a block (CoopBlock) and by warps (CoopWarp) into the right neighbour's
// symmetric buffer, at offsets that are not 16-byte aligned (the byte-wise heads and tails) and
// at ones that are.
__global__ void put_kernel(aperture::PeerView peers, unsigned char* dst, const unsigned char* src, std::uint64_t bytes,
                           std::uint64_t offset, int use_warps) {
  const int right = (peers.rank + 1) % peers.world_size;
  if (use_warps) {
    const aperture::CoopWarp g;
    const std::uint64_t share = (bytes + g.meta_group_size() - 1) / g.meta_group_size();
    const std::uint64_t begin = share * g.meta_group_rank() < bytes ? share * g.meta_group_rank() : bytes;
    const std::uint64_t end = begin + share < bytes ? begin + share : bytes;
    aperture::put(g, dst + offset + begin, src + begin, end - begin, peers.rank, right, peers.peer_bases);
  } else {
    aperture::put(aperture::CoopBlock{}, dst + offset, src, bytes, peers.rank, right, peers.peer_bases);
  }
}

void coop_put_cases(aperture::Provider& provider, Communicator& comm, cudaStream_t stream) {
  constexpr std::uint64_t kBytes = 1 << 20;
  aperture::Allocation a = provider.allocate(kBytes + 64);
  DeviceBuffer<unsigned char> src(kBytes);
  const int left = (g_rank + g_world - 1) % g_world;
  for (std::uint64_t offset : {0, 16, 3}) {
    for (int warps : {0, 1}) {
      const std::uint64_t salt = next_salt();
      std::vector<unsigned char> mine(kBytes);
      for (std::uint64_t i = 0; i < kBytes; ++i) mine[i] = static_cast<unsigned char>(mix(salt ^ (i * 31 + g_rank)) & 0xff);
      src.upload(mine);
      CUDA(cudaMemset(a.ptr, 0, kBytes + 64));
      CUDA(cudaDeviceSynchronize());
      comm.barrier(stream);  // nobody puts before its neighbour has cleared
      put_kernel<<<warps ? 8 : 4, 256, 0, stream>>>(a.map.peer_view(), static_cast<unsigned char*>(a.ptr), src.ptr, kBytes - 5,
                                                    offset, warps);
      CUDA(cudaGetLastError());
      comm.barrier(stream);  // the kernels' writes are visible after a barrier (its fence + signal)
      comm.check(stream);
      std::vector<unsigned char> got(kBytes + 64);
      CUDA(cudaMemcpy(got.data(), a.ptr, got.size(), cudaMemcpyDeviceToHost));
      std::vector<unsigned char> got_range(got.begin() + offset, got.begin() + offset + kBytes - 5);
      expect_all(got_range, kBytes - 5,
                 [&](std::uint64_t i) { return static_cast<unsigned char>(mix(salt ^ (i * 31 + left)) & 0xff); },
                 "put by a " + std::string(warps ? "CoopWarp" : "CoopBlock") + " offset " + std::to_string(offset));
    }
  }
  comm.barrier(stream);
  comm.check(stream);
  provider.free(a);
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device here\n");
    return kSkip;
  }
  try {
    aperture::Team team = aperture::Team::from_env();
    g_rank = team.rank();
    g_world = team.size();
    const char* chosen = std::getenv("APERTURE_GPU_PROVIDER");
    const std::string name = chosen != nullptr && *chosen != '\0' ? chosen : "cuda-ipc";
    for (const auto& s : aperture::provider_statuses())
      if (s.name == name && !s.available) {
        std::printf("SKIP: provider %s cannot run here: %s\n", name.c_str(), s.reason.c_str());
        return kSkip;
      }
    auto provider = aperture::make_provider(name, team);
    g_seed = test::agreed_seed(team);
    if (g_rank == 0) std::printf("gpu_collectives_test: %d rank(s) on %s, seed %#" PRIx64 "\n", g_world, name.c_str(), g_seed);
    {
      Communicator comm(*provider, team);
      Communicator::Options small;
      small.half_bytes = 4096;  // many pieces per block
      small.max_parts = 4;
      small.one_shot_max_bytes = 2048;
      small.all_to_all_direct_min_bytes = 0;  // all_to_all on a symmetric input: zero-copy at every size
      small.broadcast_direct_min_bytes = 0;   // broadcast likewise
      Communicator tiny(*provider, team, small);
      Communicator::Options ll_always;  // the push path at every size, in pieces above its slot
      ll_always.ll_max_bytes = std::numeric_limits<std::size_t>::max();
      Communicator ll(*provider, team, ll_always);
      Communicator::Options ll_never;  // the staged path at every size
      ll_never.ll_max_bytes = 0;
      Communicator staged(*provider, team, ll_never);
      Communicator::Options small_ll = small;
      small_ll.ll_max_bytes = std::numeric_limits<std::size_t>::max();
      Communicator tiny_ll(*provider, team, small_ll);
      cudaStream_t stream = nullptr;
      CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      const std::vector<std::uint64_t> counts = {0, 1, 3, 17, 1000, 70001, (1u << 20) + 5};
      const std::vector<std::uint64_t> small_counts = {0, 5, 1000, 20000};
      for (int round = 0; round < 3; ++round) comm.barrier(stream);
      path_cases(comm, stream);
      const char* paths_only = std::getenv("APERTURE_TEST_PATHS_ONLY");
      if (paths_only == nullptr || std::string(paths_only) != "1") {
        run_type<float>(comm, stream, counts);
        run_type<__half>(comm, stream, counts);
        run_type<__nv_bfloat16>(comm, stream, counts);
        run_type<std::int32_t>(comm, stream, counts);
        run_type<float>(tiny, stream, small_counts);
        run_type<__half>(tiny, stream, small_counts);
        run_type<float>(ll, stream, counts);
        run_type<__nv_bfloat16>(ll, stream, counts);
        run_type<__half>(ll, stream, small_counts);
        run_type<std::int32_t>(ll, stream, small_counts);
        run_type<float>(staged, stream, small_counts);
        run_type<__nv_bfloat16>(staged, stream, small_counts);
        run_type<float>(tiny_ll, stream, small_counts);
        run_type<__half>(tiny_ll, stream, small_counts);
        every_type_cases(*provider, comm, stream, {1, 3, 17, 1000, 70001});
        every_type_cases(*provider, ll, stream, {1, 17, 4099});
        every_type_cases(*provider, tiny, stream, {5, 20000});
        symmetric_cases<float>(*provider, comm, stream, counts);
        symmetric_cases<__nv_bfloat16>(*provider, comm, stream, counts);
        symmetric_cases<float>(*provider, tiny, stream, small_counts);
        symmetric_cases<__half>(*provider, tiny, stream, small_counts);
        ll_back_to_back(comm, stream);
        two_ll_in_one_kernel(comm, stream);
        ll_back_to_back(tiny_ll, stream);
        graph_replay(comm, stream);
        coop_put_cases(*provider, comm, stream);
        layouts_differ_case(*provider, team, stream);
        broadcast_root_overlaps_case(*provider, team, stream);
        offsets_differ_case(*provider, team, stream);
      }
      comm.check(stream);
      CUDA(cudaStreamDestroy(stream));
    }
    long long all[2] = {g_checks, g_failures}, sums[2] = {0, 0};
    std::vector<long long> gathered(2 * static_cast<std::size_t>(g_world));
    team.allgather(all, gathered.data(), sizeof all);
    for (int r = 0; r < g_world; ++r) {
      sums[0] += gathered[2 * r];
      sums[1] += gathered[2 * r + 1];
    }
    if (sums[1] != 0) {
      std::printf("FAIL gpu_collectives_test: %lld of %lld checks failed (rank %d: %lld)\n", sums[1], sums[0], g_rank, g_failures);
      return 1;
    }
    if (g_rank == 0) std::printf("PASS gpu_collectives_test: %lld checks\n", sums[0]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: FAIL gpu_collectives_test: %s\n", g_rank, e.what());
    return 1;
  }
}
