// tests/conformance/nvshmem_provider_test.cu — what the nvshmem provider promises beyond the
// conformance suite: memory the program took from nvshmem_malloc itself, never seen by allocate,
// described with symmetric_address_map and driven by the same operations; and a second provider
// in the same process, sharing the one NVSHMEM runtime.
#include <nvshmem_host.h>

#include <gtest/gtest.h>

#include "provider_fixture.h"

namespace conformance {
namespace {

using aperture::Allocation;
using test::contains;
using test::error_of;

class NvshmemTest : public ProviderTest {};

TEST_P(NvshmemTest, ImportedMemoryFromNvshmemMalloc) {
  const std::size_t count = slot_count();
  const std::size_t bytes = (n_ * count + 64) * sizeof(std::int64_t);
  auto* own = static_cast<std::int64_t*>(nvshmem_malloc(bytes));  // collective, the program's own
  ASSERT_NE(own, nullptr);
  memory().zero(own, bytes);
  std::int64_t* inbox = own + 64;  // a range that starts inside the buffer
  const aperture::SymmetricAddressMap map = provider().symmetric_address_map(inbox, n_ * count * sizeof(std::int64_t));
  learn_direct(map);
  EXPECT_EQ(map.allocation_base, reinterpret_cast<std::uintptr_t>(inbox));
  const Allocation& probe = allocate(64);  // the provider's own memory reaches the same peers
  for (int p = 0; p < n_; ++p) {
    EXPECT_EQ(map.host_peer_bases()[p], reinterpret_cast<std::int64_t>(nvshmem_ptr(inbox, p)))
        << "imported table entry " << p << " == nvshmem_ptr";
    EXPECT_EQ(map.is_direct(p), probe.map.is_direct(p)) << "peer " << p;
  }
  sync();
  memory().store_to_peers(Element::int64, inbox, count, me_, n_, map.peer_bases(), 9);
  sync();
  EXPECT_TRUE(same_elements(memory().read(inbox, n_ * count), expected_from_sources<std::int64_t>(count, 9)))
      << "imported nvshmem_malloc memory, the generic store";
  EXPECT_TRUE(same_elements(memory().read(own, 64), std::vector<std::int64_t>(64, 0))) << "nothing before the range";
  sync();
  nvshmem_free(own);
}

// A second provider in the same process shares the one NVSHMEM runtime; its allocations are not
// the first one's to free, and the first one keeps working after the second goes.
TEST_P(NvshmemTest, SecondProviderSharesTheRuntime) {
  auto second = aperture::make_provider("nvshmem", world());
  Allocation a = second->allocate(1 << 16);
  Allocation& b = allocate(1 << 16);
  EXPECT_NE(a.ptr, b.ptr);
  for (int p = 0; p < n_; ++p) EXPECT_EQ(a.map.is_direct(p), b.map.is_direct(p));
  const auto wrong_provider = error_of([&] { provider().free(a); });
  EXPECT_TRUE(contains(wrong_provider, "not a live allocation of this provider")) << wrong_provider;
  const aperture::SymmetricAddressMap kept = a.map;
  sync();
  second->free(a);
  second.reset();  // frees nothing else: NVSHMEM stays up for the first provider
  EXPECT_TRUE(same_elements(memory().read(kept.peer_bases(), n_),
                            std::vector<std::int64_t>(kept.host_peer_bases().begin(), kept.host_peer_bases().end())));
  Allocation c = provider().allocate(4096);
  provider().free(c);
}

INSTANTIATE_TEST_SUITE_P(Conformance, NvshmemTest, ::testing::Values("nvshmem"), provider_test_name);

}  // namespace
}  // namespace conformance
