// tests/gpu/gpu_bulk_test.cu — aperture/bulk.h on GPU memory: bulk_put, bulk_get and bulk_copy
// to the right neighbour, on each path (automatic, copy_engine, sm_copy), from 1 byte to 64 MiB,
// at offsets that leave the two pointers 16-byte aligned, aligned to 1 byte only, and 8 apart.
//
// Each transfer sits between two kernels on the same stream, with no host synchronisation
// between: one writes the source first (a new salt each time), one reads the destination after
// into a readback buffer. So a transfer that ran out of order with the stream reads stale source
// or is read before it landed, and shows. Every rank then checks every byte written: the
// readback, and (after a barrier) the part of its own window its neighbour wrote, with 64 guard
// bytes after it and the bytes before it untouched. Values differ per rank, byte and round.
//
//     aperture launch -n 2 -- gpu_bulk_test                       # cuda-ipc
//     APERTURE_GPU_PROVIDER=cuda-vmm aperture launch -n 2 -- gpu_bulk_test
#include <aperture/bulk.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "gpu_test.h"

namespace {

using aperture::BulkOptions;
using aperture::BulkPath;

constexpr std::size_t kMaxBytes = std::size_t{64} << 20;
constexpr std::size_t kPad = 64;               // room for the offsets and the guard bytes
constexpr std::size_t kHalf = kMaxBytes + kPad;  // the window: halves A (sources) and B (destinations)
constexpr unsigned char kUntouched = 0xEE;

// The byte rank `rank` writes at index i in round `salt`: differs per rank, byte and round.
__host__ __device__ inline unsigned char pattern(int rank, std::size_t i, int salt) {
  std::uint32_t x = static_cast<std::uint32_t>(i) * 2654435761u ^ static_cast<std::uint32_t>(i >> 32) ^
                    static_cast<std::uint32_t>(rank + 1) * 40503u ^ static_cast<std::uint32_t>(salt) * 2246822519u;
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return static_cast<unsigned char>(x);
}

__global__ void fill_kernel(unsigned char* dst, std::size_t bytes, int rank, int salt) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < bytes; i += std::size_t{gridDim.x} * blockDim.x)
    dst[i] = pattern(rank, i, salt);
}
__global__ void read_kernel(unsigned char* readback, const unsigned char* src, std::size_t bytes) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < bytes; i += std::size_t{gridDim.x} * blockDim.x)
    readback[i] = src[i];
}
constexpr int kBlocks = 264;
constexpr int kThreads = 256;

enum class Op { put, get, copy };
const char* name_of(Op op) { return op == Op::put ? "bulk_put" : op == Op::get ? "bulk_get" : "bulk_copy"; }
const char* name_of(BulkPath p) {
  return p == BulkPath::automatic ? "automatic" : p == BulkPath::copy_engine ? "copy_engine" : "sm_copy";
}

struct Buffers {
  aperture::Allocation window;  // A = [0, kHalf), B = [kHalf, 2 kHalf)
  unsigned char* local_src = nullptr;  // put's source
  unsigned char* local_dst = nullptr;  // get's destination
  unsigned char* readback = nullptr;
  cudaStream_t stream = nullptr;
  unsigned char* a() const { return window.as<unsigned char>(); }
  unsigned char* b() const { return window.as<unsigned char>() + kHalf; }
};

// Expect `got` = [untouched x dst_offset][pattern(writer, src_offset + k, salt) x bytes][untouched x guard].
void check_bytes(const std::vector<unsigned char>& got, std::size_t dst_offset, std::size_t bytes, std::size_t guard,
                 int writer, std::size_t src_offset, int salt, const std::string& what) {
  for (std::size_t i = 0; i < dst_offset + bytes + guard; ++i) {
    const bool written = i >= dst_offset && i < dst_offset + bytes;
    const unsigned char want = written ? pattern(writer, src_offset + (i - dst_offset), salt) : kUntouched;
    if (got[i] != want) {
      ADD_FAILURE() << what << ": byte " << i << " (" << (written ? "written" : "guard") << ", offset " << dst_offset
                    << ", " << bytes << " bytes) is " << int(got[i]) << ", expected " << int(want);
      return;
    }
  }
}

void run_case(gputest::Job& job, Buffers& buf, Op op, BulkPath path, std::size_t bytes, std::size_t dst_offset,
              std::size_t src_offset, int salt) {
  const int me = job.me, n = job.n;
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  const aperture::SymmetricAddressMap& map = buf.window.map;
  const std::int64_t* table = map.host_peer_bases().data();
  const std::size_t span = dst_offset + bytes + kPad / 2;  // the destination region with its guard
  const std::size_t guard = kPad / 2;
  // Every destination starts untouched (B of the window, the local destination, the readback).
  APERTURE_CUDA_CHECK(cudaMemset(buf.b(), kUntouched, span), "test");
  APERTURE_CUDA_CHECK(cudaMemset(buf.local_dst, kUntouched, span), "test");
  APERTURE_CUDA_CHECK(cudaMemset(buf.readback, kUntouched, span), "test");
  job.sync();

  const BulkOptions options{path};
  const cudaStream_t s = buf.stream;
  unsigned char* const right_a = aperture::translate(buf.a(), me, right, table);
  unsigned char* const right_b = aperture::translate(buf.b(), me, right, table);
  unsigned char* const left_b = aperture::translate(buf.b(), me, left, table);
  unsigned char* read_from = nullptr;  // the destination, as this rank's kernel reads it
  switch (op) {
    case Op::put:  // local source -> right's B
      fill_kernel<<<kBlocks, kThreads, 0, s>>>(buf.local_src, src_offset + bytes, me, salt);
      aperture::bulk_put(buf.b() + dst_offset, buf.local_src + src_offset, bytes, right, map, s, options);
      read_from = right_b;
      break;
    case Op::get:  // right's A (written by this rank's kernel) -> local destination
      fill_kernel<<<kBlocks, kThreads, 0, s>>>(right_a, src_offset + bytes, me, salt);
      aperture::bulk_get(buf.local_dst + dst_offset, buf.a() + src_offset, bytes, right, map, s, options);
      read_from = buf.local_dst;
      break;
    case Op::copy:  // right's A -> left's B, neither of them (at 3 ranks or more) this rank
      fill_kernel<<<kBlocks, kThreads, 0, s>>>(right_a, src_offset + bytes, me, salt);
      aperture::bulk_copy(buf.b() + dst_offset, buf.a() + src_offset, bytes, /*src_rank=*/right, /*dst_rank=*/left,
                          map, s, options);
      read_from = left_b;
      break;
  }
  gputest::launched("fill_kernel");
  read_kernel<<<kBlocks, kThreads, 0, s>>>(buf.readback, read_from, span);
  gputest::launched("read_kernel");
  APERTURE_CUDA_CHECK(cudaStreamSynchronize(s), "test");
  job.team.barrier();  // every rank's transfer has landed

  const std::string what = std::string(name_of(op)) + " " + name_of(path) + " " + std::to_string(bytes) +
                           " B, dst offset " + std::to_string(dst_offset) + ", src offset " +
                           std::to_string(src_offset);
  // What this rank's read kernel saw, right after its transfer on the stream: its own values.
  check_bytes(gputest::to_host(buf.readback, span), dst_offset, bytes, guard, me, src_offset, salt,
              what + " (readback on the stream)");
  // Its own B, written by a neighbour: put by the left one, copy by the right one (get writes
  // only local memory).
  if (op == Op::put) check_bytes(gputest::to_host(buf.b(), span), dst_offset, bytes, guard, left, src_offset, salt, what);
  if (op == Op::copy) check_bytes(gputest::to_host(buf.b(), span), dst_offset, bytes, guard, right, src_offset, salt, what);
  job.team.barrier();  // nobody clears its window while a neighbour still reads it
}

struct Offsets {
  std::size_t dst, src;
};

void run_all(Op op) {
  gputest::Job& job = gputest::job();
  Buffers buf;
  buf.window = job.provider->allocate(2 * kHalf);
  job.learn_direct(buf.window.map);
  const int right = (job.me + 1) % job.n, left = (job.me + job.n - 1) % job.n;
  if (!job.reaches(job.me, right) || !job.reaches(job.me, left)) {
    job.provider->free(buf.window);
    GTEST_SKIP() << "rank " << job.me << " does not reach its neighbours directly here";
  }
  APERTURE_CUDA_CHECK(cudaMalloc(&buf.local_src, kHalf), "test");
  APERTURE_CUDA_CHECK(cudaMalloc(&buf.local_dst, kHalf), "test");
  APERTURE_CUDA_CHECK(cudaMalloc(&buf.readback, kHalf), "test");
  APERTURE_CUDA_CHECK(cudaStreamCreateWithFlags(&buf.stream, cudaStreamNonBlocking), "test");
  const std::size_t crossover = aperture::detail::kBulkCopyEngineMinBytes;
  const std::vector<std::size_t> sizes = {1,         3,         16,            255,       4097,          65536,
                                          crossover - 1, crossover, crossover + 17, 16u << 20, kMaxBytes};
  // 16-byte aligned alike; 1-byte aligned only (5 - 3 = 2 apart: 2-byte vectors after a head);
  // 8 apart (8-byte vectors); 1 apart (bytes).
  const std::vector<Offsets> offsets = {{0, 0}, {5, 3}, {8, 0}, {1, 0}};
  int salt = 1;
  for (BulkPath path : {BulkPath::automatic, BulkPath::copy_engine, BulkPath::sm_copy})
    for (std::size_t bytes : sizes)
      for (Offsets o : offsets) run_case(job, buf, op, path, bytes, o.dst, o.src, salt++);
  // A count of 0 enqueues nothing, on every path.
  for (BulkPath path : {BulkPath::automatic, BulkPath::copy_engine, BulkPath::sm_copy})
    aperture::bulk_put(buf.b(), buf.local_src, 0, right, buf.window.map, buf.stream, BulkOptions{path});
  job.sync();
  APERTURE_CUDA_CHECK(cudaStreamDestroy(buf.stream), "test");
  APERTURE_CUDA_CHECK(cudaFree(buf.local_src), "test");
  APERTURE_CUDA_CHECK(cudaFree(buf.local_dst), "test");
  APERTURE_CUDA_CHECK(cudaFree(buf.readback), "test");
  job.provider->free(buf.window);
}

}  // namespace

TEST(GpuBulk, PutOnEveryPathAndSize) { run_all(Op::put); }
TEST(GpuBulk, GetOnEveryPathAndSize) { run_all(Op::get); }
TEST(GpuBulk, CopyOnEveryPathAndSize) { run_all(Op::copy); }

// On GPU memory the checks are the host path's (tests/unit/bulk_test.cpp): one case each, to see
// that a GPU map reaches them too, and that nothing was enqueued.
TEST(GpuBulk, RefusesBadRanksAndRangesOnGpuMemory) {
  gputest::Job& job = gputest::job();
  aperture::Allocation window = job.provider->allocate(4096);
  unsigned char* mine = window.as<unsigned char>();
  EXPECT_THROW(aperture::bulk_put(mine, mine, 16, job.n, window.map), aperture::Error);
  EXPECT_THROW(aperture::bulk_get(mine, mine + 4090, 16, 0, window.map), aperture::Error);
  EXPECT_THROW(aperture::bulk_copy(mine, mine + 4096, 1, 0, 0, window.map), aperture::Error);
  job.sync();
  job.provider->free(window);
}

int main(int argc, char** argv) {
  const char* chosen = std::getenv("APERTURE_GPU_PROVIDER");
  const std::string provider = chosen != nullptr && *chosen != '\0' ? chosen : "cuda-ipc";
  return gputest::run_tests(argc, argv, "gpu_bulk_test",
                            [&] { return gputest::start("gpu_bulk_test", provider.c_str()); });
}
