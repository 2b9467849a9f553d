// The collectives on GPU memory (the cuda-ipc provider; APERTURE_GPU_PROVIDER picks another):
// barrier, broadcast, all-gather, reduce-scatter, all-reduce (one-shot, two-shot, ll, automatic),
// all-to-all, for float, __half, __nv_bfloat16 and int32, sum/min/max, in place and not, with
// the default staging and a tiny one (many pieces, many blocks), and with the push (LL) path
// always and never; LL calls of changing sizes launched back to back (the epoch halves reused
// many times without the host in between) and replayed from a CUDA graph; a CUDA graph
// replaying a captured all-reduce; the zero-copy forms on symmetric inputs; blocks taking
// contiguous slices (the default) and interleaved pieces; aperture::put by a CoopBlock and by CoopWarps
// at odd offsets. Every
// element is checked on the host against values computed there from one seed drawn by rank 0.
//
// A plain program (the GPU machine may lack GoogleTest), run as ranks of a job:
//     aperture launch -n 2 -- gpu_collectives_test
// Prints "SKIP: <reason>" and exits 77 without a GPU; prints "PASS gpu_collectives_test: N
// checks" or "FAIL ..." and exits 0 or 1.
#include <cuda_runtime.h>

#include <aperture/aperture.h>
#include <aperture/collectives/collectives.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using aperture::AllReduceAlgorithm;
using aperture::Communicator;
using aperture::ReduceOp;

constexpr int kSkip = 77;

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw aperture::Error(std::string(call) + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}
#define CUDA(call) check_cuda((call), #call)

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t g_seed = 0;
int g_rank = 0, g_world = 1;
long long g_checks = 0, g_failures = 0;

// Rank `rank`'s element i of buffer `salt`. 16-bit floats get values with few mantissa bits.
template <class T>
T value(int rank, std::uint64_t salt, std::uint64_t i) {
  const std::uint64_t h = mix(g_seed ^ mix(static_cast<std::uint64_t>(rank) * 0x100000001b3ull ^ mix(salt) ^ (i * 0x9e37ull)));
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

// An independent reference for the 16-bit floats, written from the IEEE 754 formats and not from
// the library (whose Accumulate the reductions use): decoding to float is exact; rounding a
// float to the 16-bit format is round-to-nearest-even, done on the bits.
namespace reference {

std::uint32_t bits_of(float f) {
  std::uint32_t x = 0;
  std::memcpy(&x, &f, sizeof x);
  return x;
}
float float_of(std::uint32_t x) {
  float f = 0;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

// binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits.
float from_half(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1f, fraction = h & 0x3ff;
  if (exponent == 0x1f) return float_of(sign | 0x7f800000 | (fraction << 13));  // inf, NaN
  if (exponent != 0) return float_of(sign | ((exponent + 112) << 23) | (fraction << 13));
  const float magnitude = static_cast<float>(fraction) * 0x1p-24f;  // subnormal (or zero): exact
  return sign != 0 ? -magnitude : magnitude;
}
std::uint16_t to_half(float f) {
  const std::uint32_t x = bits_of(f);
  const std::uint32_t sign = (x >> 16) & 0x8000, magnitude = x & 0x7fffffff;
  if (magnitude > 0x7f800000) return static_cast<std::uint16_t>(sign | 0x7e00);  // NaN
  if (magnitude >= 0x477ff000) return static_cast<std::uint16_t>(sign | 0x7c00);  // rounds to 65520 or more: inf
  if (magnitude < 0x38800000) {  // below 2^-14: a subnormal half (or zero), in units of 2^-24
    if (magnitude < 0x33000000) return static_cast<std::uint16_t>(sign);  // below 2^-25: rounds to zero
    const std::uint32_t mantissa = (magnitude & 0x7fffff) | 0x800000;
    const int shift = 126 - static_cast<int>(magnitude >> 23);  // 14..24
    std::uint32_t q = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1), tie = 1u << (shift - 1);
    if (rest > tie || (rest == tie && (q & 1) != 0)) ++q;
    return static_cast<std::uint16_t>(sign | q);
  }
  std::uint32_t h = (magnitude >> 13) - (112u << 10);  // rebias the exponent, keep 10 fraction bits
  const std::uint32_t rest = magnitude & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1) != 0)) ++h;  // a carry moves into the exponent, as it should
  return static_cast<std::uint16_t>(sign | h);
}

// bfloat16: the upper half of a float.
float from_bfloat16(std::uint16_t b) { return float_of(static_cast<std::uint32_t>(b) << 16); }
std::uint16_t to_bfloat16(float f) {
  const std::uint32_t x = bits_of(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<std::uint16_t>((x >> 16) | 0x40);  // NaN stays NaN
  return static_cast<std::uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

template <class T>
std::uint16_t raw16(T v) {
  std::uint16_t r = 0;
  std::memcpy(&r, &v, sizeof r);
  return r;
}
template <class T>
T from_raw16(std::uint16_t r) {
  T v;
  std::memcpy(&v, &r, sizeof r);
  return v;
}

}  // namespace reference

// Folded in rank order, as the kernels do; 16-bit floats summed in float and rounded once, by
// the reference above.
template <class T>
T folded(ReduceOp op, std::uint64_t salt, std::uint64_t i) {
  constexpr bool is_half = std::is_same_v<T, __half>, is_bf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (is_half || is_bf16) {
    const auto decode = [](T v) {
      return is_half ? reference::from_half(reference::raw16(v)) : reference::from_bfloat16(reference::raw16(v));
    };
    float acc = decode(value<T>(0, salt, i));
    for (int r = 1; r < g_world; ++r) {
      const float x = decode(value<T>(r, salt, i));
      acc = op == ReduceOp::sum ? acc + x : op == ReduceOp::min ? (x < acc ? x : acc) : (acc < x ? x : acc);
    }
    return reference::from_raw16<T>(is_half ? reference::to_half(acc) : reference::to_bfloat16(acc));
  } else {
    T acc = value<T>(0, salt, i);
    for (int r = 1; r < g_world; ++r) {
      const T x = value<T>(r, salt, i);
      acc = op == ReduceOp::sum ? static_cast<T>(acc + x) : op == ReduceOp::min ? (x < acc ? x : acc) : (acc < x ? x : acc);
    }
    return acc;
  }
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
        for (AllReduceAlgorithm algo : {AllReduceAlgorithm::one_shot, AllReduceAlgorithm::automatic}) {
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
    }
  comm.barrier(stream);
  comm.check(stream);
  provider.free(a);
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
    if (g_rank == 0) {
      const char* given = std::getenv("APERTURE_TEST_SEED");
      g_seed = given != nullptr ? std::strtoull(given, nullptr, 0) : (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
      std::printf("gpu_collectives_test: %d rank(s) on %s, seed %#" PRIx64 "\n", g_world, name.c_str(), g_seed);
    }
    team.broadcast(&g_seed, sizeof g_seed, 0);
    {
      Communicator comm(*provider, team);
      Communicator::Options small;
      small.half_bytes = 4096;  // many pieces per block
      small.max_parts = 4;
      small.one_shot_max_bytes = 2048;
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
      setenv("APERTURE_COLLECTIVES_INTERLEAVE", "1", 1);  // blocks take interleaved pieces
      Communicator interleaved(*provider, team, small);
      unsetenv("APERTURE_COLLECTIVES_INTERLEAVE");
      cudaStream_t stream = nullptr;
      CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      const std::vector<std::uint64_t> counts = {0, 1, 3, 17, 1000, 70001, (1u << 20) + 5};
      const std::vector<std::uint64_t> small_counts = {0, 5, 1000, 20000};
      for (int round = 0; round < 3; ++round) comm.barrier(stream);
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
      run_type<float>(interleaved, stream, small_counts);
      symmetric_cases<float>(*provider, comm, stream, counts);
      symmetric_cases<__nv_bfloat16>(*provider, comm, stream, counts);
      symmetric_cases<float>(*provider, tiny, stream, small_counts);
      symmetric_cases<__half>(*provider, interleaved, stream, small_counts);
      ll_back_to_back(comm, stream);
      ll_back_to_back(tiny_ll, stream);
      graph_replay(comm, stream);
      coop_put_cases(*provider, comm, stream);
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
