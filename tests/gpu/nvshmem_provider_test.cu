// tests/gpu/nvshmem_provider_test.cu — the nvshmem provider: memory allocated entirely by
// NVSHMEM, driven by aperture's unmodified kernels, with no aperture heap in the process.
//
// Every device operation (store, load, put, get, copy, every atomic, signal/wait, views) on
// nvshmem_align'd memory; the linear heap (one allocation's table translates another's memory);
// memory the program took from nvshmem_malloc itself, described with symmetric_address_map and
// driven by the same kernels; a second provider in the same process (one NVSHMEM runtime);
// misuse and its messages.
//
//     aperture launch -n 2 -- nvshmem_provider_test
#include <nvshmem_host.h>

#include "foreign_memory_ops.cuh"

namespace {

using foreign::kBlocks;
using foreign::kCount;
using foreign::kThreads;

// Imported memory: a buffer the program took from NVSHMEM itself, never seen by allocate,
// described with symmetric_address_map and driven by the generic kernels.
void imported(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  const std::size_t bytes = (n * kCount + 64) * sizeof(std::int64_t);
  auto* own = static_cast<std::int64_t*>(nvshmem_malloc(bytes));  // collective, the program's own
  CHECK(own != nullptr);
  if (own == nullptr) return;
  APERTURE_CUDA_CHECK(cudaMemset(own, 0, bytes), "test");
  std::int64_t* inbox = own + 64;  // a range that starts inside the buffer
  const aperture::SymmetricAddressMap map = provider.symmetric_address_map(inbox, n * kCount * sizeof(std::int64_t));
  CHECK(map.allocation_base == reinterpret_cast<std::uintptr_t>(inbox));
  for (int p = 0; p < n; ++p) {
    void* vouched = nvshmem_ptr(inbox, p);
    CHECK_MSG(map.host_peer_bases()[p] == reinterpret_cast<std::int64_t>(vouched),
              "imported table entry " + std::to_string(p) + " == nvshmem_ptr");
    CHECK(map.is_direct(p) == job.reaches(me, p));
  }
  job.sync();
  gputest::store_to_peers<<<kBlocks, kThreads>>>(inbox, kCount, me, n, map.peer_bases(), 9);
  gputest::launched("store_to_peers (imported)");
  job.sync();
  CHECK_RANGE(gputest::to_host(inbox, n * kCount).data(),
              gputest::expected_from_sources<std::int64_t>(job, kCount, 9),
              "imported nvshmem_malloc memory, generic store kernel");
  CHECK(gputest::to_host(own, 64) == std::vector<std::int64_t>(64, 0));  // nothing before the range
  job.sync();
  nvshmem_free(own);
}

// A second provider in the same process shares the one NVSHMEM runtime.
void second_provider(gputest::Job& job) {
  auto second = aperture::make_provider("nvshmem", job.team);
  auto a = second->allocate(1 << 16);
  auto b = job.provider->allocate(1 << 16);
  CHECK(a.ptr != b.ptr);
  for (int p = 0; p < job.n; ++p) CHECK(a.map.is_direct(p) == b.map.is_direct(p));
  const auto wrong_provider = test::error_of([&] { job.provider->free(a); });
  CHECK_MSG(test::contains(wrong_provider, "not a live allocation of this provider"), wrong_provider);
  const aperture::SymmetricAddressMap kept = a.map;
  job.sync();
  second->free(a);
  job.provider->free(b);
  second.reset();  // frees nothing else: NVSHMEM stays up for the first provider
  const auto table = gputest::to_host(kept.peer_bases(), job.n);
  for (int p = 0; p < job.n; ++p) CHECK(table[p] == kept.host_peer_bases()[p]);
  auto c = job.provider->allocate(4096);
  job.provider->free(c);
}

}  // namespace

int main() {
  return gputest::run_main("nvshmem_provider_test", [] {
    auto job_ptr = foreign::start("nvshmem_provider_test", "nvshmem");
    gputest::Job& job = *job_ptr;
    foreign::status_line(job, "nvshmem", "NVSHMEM 3.");
    foreign::every_operation(job, "nvshmem", /*linear=*/true);
    gputest::cross_allocation(job, foreign::kShape, gputest::Fresh::zeroed);  // the heap is linear
    imported(job);
    foreign::bad_requests(job);
    second_provider(job);
    job.sync();
    return gputest::finish(job, "nvshmem_provider_test");
  });
}
