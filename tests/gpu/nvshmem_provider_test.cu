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
using gputest::pattern;

// The heap is linear: B, translated with A's table, is B on every peer.
void cross_allocation(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  aperture::Allocation first = provider.allocate(64);
  aperture::Allocation gap = provider.allocate(12345);
  aperture::Allocation target = provider.allocate(n * kCount * sizeof(std::int64_t), 4096);
  CHECK(reinterpret_cast<std::uintptr_t>(target.ptr) % 4096 == 0);
  const auto a = first.map.host_peer_bases();
  const auto b = target.map.host_peer_bases();
  const std::int64_t distance = reinterpret_cast<std::int64_t>(target.ptr) - reinterpret_cast<std::int64_t>(first.ptr);
  for (int p = 0; p < n; ++p)
    if (first.map.is_direct(p)) CHECK(b[p] - a[p] == distance);
  job.sync();
  // The headline kernel, handed another allocation's table.
  foreign::store_to_peers<<<kBlocks, kThreads>>>(target.as<std::int64_t>(), me, n, first.map.peer_bases(), 6);
  gputest::launched("store_to_peers");
  job.sync();
  CHECK_RANGE(gputest::to_host(target.as<std::int64_t>(), n * kCount).data(),
              foreign::expected_slots<std::int64_t>(
                  n, 6, [&](std::size_t s) { return job.reaches(int(s), me); }, [](std::size_t s) { return int(s); }),
              "cross-allocation: stored with another allocation's table");
  job.sync();
  provider.free(target);
  provider.free(gap);
  provider.free(first);
}

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
  foreign::store_to_peers<<<kBlocks, kThreads>>>(inbox, me, n, map.peer_bases(), 9);
  gputest::launched("store_to_peers (imported)");
  job.sync();
  CHECK_RANGE(gputest::to_host(inbox, n * kCount).data(),
              foreign::expected_slots<std::int64_t>(
                  n, 9, [&](std::size_t s) { return job.reaches(int(s), me); }, [](std::size_t s) { return int(s); }),
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
  const auto wrong_provider = foreign::error_of([&] { job.provider->free(a); });
  CHECK_MSG(foreign::contains(wrong_provider, "not a live allocation of this provider"), wrong_provider);
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

void status_line(gputest::Job& job) {
  for (const auto& s : aperture::provider_statuses())
    if (s.name == "nvshmem") {
      CHECK(s.compiled_in && s.available);
      CHECK_MSG(foreign::contains(s.reason, "NVSHMEM 3."), s.reason);
      if (job.me == 0) std::printf("aperture info: nvshmem: %s\n", s.reason.c_str());
    }
}

}  // namespace

int main() {
  return gputest::run_main("nvshmem_provider_test", [] {
    auto job_ptr = foreign::start("nvshmem_provider_test", "nvshmem");
    gputest::Job& job = *job_ptr;
    status_line(job);
    foreign::identity_and_tables(job, "nvshmem", /*linear=*/true);
    foreign::rma<std::int32_t>(job);
    foreign::rma<std::int64_t>(job);
    foreign::rma<float>(job);
    foreign::rma<double>(job);
    foreign::atomics(job);
    foreign::signals(job);
    foreign::views(job);
    cross_allocation(job);
    imported(job);
    foreign::bad_requests(job);
    second_provider(job);
    job.sync();
    return gputest::finish(job, "nvshmem_provider_test");
  });
}
