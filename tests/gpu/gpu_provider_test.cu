// tests/gpu/gpu_provider_test.cu — the cuda-ipc provider itself, from the host: which GPU each
// rank took, the table invariant (host and device copies), equal offsets on every rank through
// allocate/free churn, alignment, bad requests and their messages, maps that outlive their
// provider, a second provider beside the first, and CUDA errors translated into aperture::Error.
//
//     aperture launch -n 2 -- gpu_provider_test
#include <cstdlib>
#include <string>

#include "../common/env_override.h"
#include "../common/error_of.h"
#include "gpu_test.h"
#include "misuse_checks.h"
#include "provider_checks.h"

namespace {

using test::contains;
using test::EnvOverride;
using test::error_of;

void identity_and_device(gputest::Job& job) {
  gputest::check_identity(job, "cuda-ipc", /*linear=*/true);
  CHECK_MSG(aperture::default_provider_name() == "cuda-ipc", "default is " + aperture::default_provider_name());
}

void table_invariant(gputest::Job& job) {
  auto& provider = *job.provider;
  const int me = job.me, n = job.n;
  aperture::Allocation a = provider.allocate(4096 * sizeof(std::int64_t));
  aperture::Allocation b = provider.allocate(1000);
  if (job.direct.empty()) job.learn_direct(a.map);
  for (const aperture::Allocation* x : {&a, &b}) {
    gputest::check_table(job, *x);
    CHECK(x->map.is_direct(me));
    CHECK(x->map.peer_bases() != x->map.host_peer_bases().data());
    const aperture::PeerView view = x->map.peer_view();
    CHECK(view.rank == me && view.world_size == n && view.peer_bases == x->map.peer_bases());
  }
  // Memory starts zeroed (the heap is cleared at start-up, like shm's fresh pages).
  gputest::check_peers_and_zeroed(job, a);
  job.sync();
  provider.free(b);
  provider.free(a);
  CHECK(a.ptr == nullptr && !a.map.has_table());
}

// The same deterministic sequence on every rank gives the same offsets everywhere.
void churn(gputest::Job& job) {
  auto& provider = *job.provider;
  std::vector<aperture::Allocation> live;
  std::vector<std::int64_t> offsets;
  const auto origin = provider.allocate(64);
  unsigned state = 12345;
  const auto next = [&] { return state = state * 1103515245u + 12345u; };
  for (int step = 0; step < 300; ++step) {
    if (!live.empty() && next() % 3 == 0) {
      const std::size_t victim = next() % live.size();
      provider.free(live[victim]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    } else {
      const std::size_t bytes = next() % 100000;
      const std::size_t alignment = std::size_t{1} << (next() % 13);
      live.push_back(provider.allocate(bytes, alignment));
      const auto& a = live.back();
      CHECK(reinterpret_cast<std::uintptr_t>(a.ptr) % alignment == 0);
      offsets.push_back(reinterpret_cast<std::int64_t>(a.ptr) - reinterpret_cast<std::int64_t>(origin.ptr));
    }
  }
  std::vector<std::int64_t> all(offsets.size() * job.n);
  job.team.allgather(offsets.data(), all.data(), offsets.size() * sizeof(std::int64_t));
  bool same = true;
  for (int r = 0; r < job.n; ++r)
    for (std::size_t i = 0; i < offsets.size(); ++i) same = same && all[r * offsets.size() + i] == offsets[i];
  CHECK_MSG(same, "allocate/free churn gave different offsets on different ranks");
  // Zero-byte allocations still get addresses of their own.
  auto z1 = provider.allocate(0);
  auto z2 = provider.allocate(0);
  CHECK(z1.ptr != nullptr && z2.ptr != nullptr && z1.ptr != z2.ptr);
  provider.free(z2);
  provider.free(z1);
  for (auto& a : live) provider.free(a);
  auto o = origin;
  provider.free(o);
}

void alignment(gputest::Job& job) {
  auto& provider = *job.provider;
  for (std::size_t align : {std::size_t{4096}, std::size_t{1} << 20, std::size_t{2} << 20}) {
    auto a = provider.allocate(100, align);
    CHECK_MSG(reinterpret_cast<std::uintptr_t>(a.ptr) % align == 0, "alignment " + std::to_string(align));
    for (int p = 0; p < job.n; ++p)
      if (a.map.is_direct(p)) CHECK(static_cast<std::uint64_t>(a.map.host_peer_bases()[p]) % align == 0);
    provider.free(a);
  }
  gputest::check_bad_alignment_refused(job, provider);
  const auto huge_align = error_of([&] { provider.allocate(100, std::size_t{4} << 20); });
  CHECK_MSG(contains(huge_align, "exceeds"), huge_align);
}

void bad_requests(gputest::Job& job) {
  auto& provider = *job.provider;
  auto a = provider.allocate(4096);
  const auto copy = gputest::free_and_check_stale_copy(job, provider, a);
  gputest::check_foreign_memory_refused(job, provider);

  const void* freed_ptr = copy.ptr;
  const auto freed = error_of([&] { provider.symmetric_address_map(freed_ptr, 8); });
  CHECK_MSG(contains(freed, "not inside a live allocation"), freed);
  auto b = provider.allocate(1000);
  const auto past_end = error_of([&] { provider.symmetric_address_map(static_cast<char*>(b.ptr) + 900, 200); });
  CHECK_MSG(contains(past_end, "not inside a live allocation"), past_end);
  provider.free(b);

  const auto too_big = error_of([&] { provider.allocate(std::size_t{1} << 40); });
  CHECK_MSG(contains(too_big, "no free block") && contains(too_big, "APERTURE_GPU_HEAP_SIZE"), too_big);
}

// A map may outlive its allocation and its provider: the table stays readable until the last
// copy goes, and freeing it afterwards is harmless.
void maps_outlive_provider(gputest::Job& job) {
  std::unique_ptr<aperture::Provider> second;
  {
    EnvOverride small("APERTURE_GPU_HEAP_SIZE", "64M");
    second = aperture::make_provider("cuda-ipc", job.team);
  }
  auto a = second->allocate(1 << 20);
  auto first_alloc = job.provider->allocate(1 << 20);
  CHECK(a.ptr != first_alloc.ptr);
  CHECK(!first_alloc.map.owns(a.ptr));  // two heaps, two address ranges
  for (int p = 0; p < job.n; ++p) CHECK(a.map.is_direct(p) == first_alloc.map.is_direct(p));
  const auto wrong_heap = error_of([&] { job.provider->symmetric_address_map(a.ptr, 8); });
  CHECK_MSG(contains(wrong_heap, "another provider"), wrong_heap);
  const aperture::SymmetricAddressMap kept = a.map;
  job.sync();
  second->free(a);
  job.provider->free(first_alloc);
  second.reset();  // the heap and its IPC mappings go; `kept` still owns its device table
  const auto table = gputest::to_host(kept.peer_bases(), job.n);
  for (int p = 0; p < job.n; ++p) CHECK(table[p] == kept.host_peer_bases()[p]);
}

void bad_environment(gputest::Job& job) {
  std::string bad;
  {
    EnvOverride nonsense("APERTURE_GPU_HEAP_SIZE", "12Q");
    bad = error_of([&] { aperture::make_provider("cuda-ipc", job.team); });
  }
  CHECK_MSG(contains(bad, "APERTURE_GPU_HEAP_SIZE='12Q'"), bad);
  job.team.barrier();
}

// With several GPUs, the provider works whichever device the caller made current since.
void other_current_device(gputest::Job& job) { gputest::check_other_current_device(job, 4096); }

// The library's CUDA error translation: the call, the status and file:line, and the thread's
// last error cleared afterwards.
void cuda_errors(gputest::Job& job) {
  void* p = nullptr;
  const auto message = error_of([&] { APERTURE_CUDA_CHECK(cudaMalloc(&p, std::size_t{1} << 60), "test allocation"); });
  CHECK_MSG(contains(message, "test allocation: cudaMalloc(&p, std::size_t{1} << 60) failed: "
                              "cudaErrorMemoryAllocation"),
            message);
  CHECK_MSG(contains(message, "gpu_provider_test.cu:"), message);
  CHECK(cudaGetLastError() == cudaSuccess);
  const auto text = APERTURE_CUDA_TRY(cudaSetDevice(-1));
  CHECK_MSG(contains(text, "cudaSetDevice(-1) failed: cudaErrorInvalidDevice"), text);
  CHECK(APERTURE_CUDA_TRY(cudaDeviceSynchronize()).empty());
}

}  // namespace

int main() {
  return gputest::run_main("gpu_provider_test", [] {
    ::setenv("APERTURE_GPU_HEAP_SIZE", "256M", 0);  // unless the caller chose one
    auto job_ptr = gputest::start("gpu_provider_test");
    gputest::Job& job = *job_ptr;
    identity_and_device(job);
    table_invariant(job);
    churn(job);
    alignment(job);
    bad_requests(job);
    maps_outlive_provider(job);
    bad_environment(job);
    other_current_device(job);
    cuda_errors(job);
    job.sync();
    return gputest::finish(job, "gpu_provider_test");
  });
}
