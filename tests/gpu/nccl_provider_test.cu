// tests/gpu/nccl_provider_test.cu — the nccl provider: memory allocated entirely by NCCL
// (ncclMemAlloc + symmetric windows), a table per allocation from ncclGetPeerPointer, driven by
// aperture's unmodified kernels, with no aperture heap in the process.
//
// Every device operation (store, load, put, get, copy, every atomic, signal/wait, views) on
// NCCL windows; two windows in one kernel, each through its own table; alignment; maps that
// outlive their window; misuse and its messages.
//
//     aperture launch -n 2 -- nccl_provider_test
#include "foreign_memory_ops.cuh"

namespace {

using foreign::kBlocks;
using foreign::kCount;
using foreign::kThreads;
using gputest::pattern;

// out[me] of every direct peer = that peer's in + me + 1: a load through one window's table
// and a store through another's, in the same loop.
__global__ void window_to_window(const std::int64_t* in, std::int64_t* out, int me, int n, const std::int64_t* in_table,
                                 const std::int64_t* out_table) {
  for (int p = 0; p < n; ++p) {
    if (in_table[p] == 0 || out_table[p] == 0) continue;
    for (std::size_t i = gputest::thread_index(); i < kCount; i += gputest::thread_count()) {
      const std::int64_t v = aperture::load(&in[i], me, p, in_table);
      aperture::store(&out[me * kCount + i], v + me + 1, me, p, out_table);
    }
  }
}

void two_windows_one_kernel(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  aperture::Allocation in = provider.allocate(kCount * sizeof(std::int64_t));
  aperture::Allocation out = provider.allocate(n * kCount * sizeof(std::int64_t));
  gputest::fill<<<kBlocks, kThreads>>>(in.as<std::int64_t>(), kCount, me, 3);
  gputest::launched("fill");
  job.sync();
  window_to_window<<<kBlocks, kThreads>>>(in.as<std::int64_t>(), out.as<std::int64_t>(), me, n, in.map.peer_bases(),
                                          out.map.peer_bases());
  gputest::launched("window_to_window");
  job.sync();
  const auto host = gputest::to_host(out.as<std::int64_t>(), n * kCount);
  std::vector<std::int64_t> expected(n * kCount, 0);
  for (int s = 0; s < n; ++s)
    if (job.reaches(s, me))
      for (std::size_t i = 0; i < kCount; ++i) expected[s * kCount + i] = pattern<std::int64_t>(me, i, 3) + s + 1;
  CHECK_RANGE(host.data(), expected, "two windows in one kernel: out[source] == my in + source + 1");
  job.sync();
  provider.free(out);
  provider.free(in);
}

void alignment_and_lifetime(gputest::Job& job) {
  auto& provider = *job.provider;
  for (std::size_t align : {std::size_t{4096}, std::size_t{1} << 20, std::size_t{2} << 20}) {
    auto a = provider.allocate(100, align);
    CHECK_MSG(reinterpret_cast<std::uintptr_t>(a.ptr) % align == 0, "alignment " + std::to_string(align));
    provider.free(a);
  }
  const auto huge = test::error_of([&] { provider.allocate(100, std::size_t{4} << 20); });
  CHECK_MSG(test::contains(huge, "exceeds"), huge);
  auto z1 = provider.allocate(0);
  auto z2 = provider.allocate(0);
  CHECK(z1.ptr != nullptr && z2.ptr != nullptr && z1.ptr != z2.ptr);
  // A map outlives its window: its table stays readable.
  const aperture::SymmetricAddressMap kept = z1.map;
  provider.free(z2);
  provider.free(z1);
  const auto table = gputest::to_host(kept.peer_bases(), job.n);
  for (int p = 0; p < job.n; ++p) CHECK(table[p] == kept.host_peer_bases()[p]);
  const auto freed = test::error_of([&] { provider.symmetric_address_map(kept.host_peer_bases().data(), 8); });
  CHECK_MSG(test::contains(freed, "not inside a live allocation"), freed);
}

}  // namespace

int main() {
  return gputest::run_main("nccl_provider_test", [] {
    auto job_ptr = foreign::start("nccl_provider_test", "nccl");
    gputest::Job& job = *job_ptr;
    foreign::status_line(job, "nccl", "NCCL 2.");
    foreign::every_operation(job, "nccl", /*linear=*/false);
    two_windows_one_kernel(job);
    alignment_and_lifetime(job);
    foreign::bad_requests(job);
    job.sync();
    return gputest::finish(job, "nccl_provider_test");
  });
}
