// Which engine a provider's memory gets from other nodes (src/engines/engine.h), and how the
// one attachment every provider over a foreign allocator uses (LiveAllocations' EngineAttachment)
// hands it to an allocation's map, its views and its close.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "aperture/aperture.h"
#include "engines/engine.h"
#include "engines/engine_attachment.h"
#include "providers/live_allocations.h"

namespace {

using aperture::MemoryKind;
using aperture::detail::choose_remote_engine;
using aperture::detail::EngineKind;
using aperture::detail::RemoteEngine;

constexpr const char* kNoMpirun = "its ranks were started by aperture, not mpirun";

TEST(EngineChoice, HostMemoryTakesTheEngineApertureEngineNames) {
  EXPECT_EQ(choose_remote_engine(MemoryKind::host, false, EngineKind::rma, "").engine, RemoteEngine::rma);
  EXPECT_EQ(choose_remote_engine(MemoryKind::host, false, EngineKind::messages, "").engine, RemoteEngine::messages);
}

TEST(EngineChoice, GpuMemoryWithoutItsOwnTransportTakesTheMessageEngine) {
  // cuda-ipc, cuda-vmm and nccl: whatever APERTURE_ENGINE says for host memory.
  EXPECT_EQ(choose_remote_engine(MemoryKind::device, false, EngineKind::rma, "").engine, RemoteEngine::messages);
  EXPECT_EQ(choose_remote_engine(MemoryKind::device, false, EngineKind::messages, "").engine, RemoteEngine::messages);
}

TEST(EngineChoice, AnAllocatorWithItsOwnTransportUsesItWithoutMpi) {
  // nvshmem: NVSHMEM reaches its PEs itself, on one node (no P2P) or several, MPI or not.
  for (const char* why : {"", "the job runs on one node", kNoMpirun})
    EXPECT_EQ(choose_remote_engine(MemoryKind::device, true, EngineKind::rma, why).engine, RemoteEngine::nvshmem)
        << why;
}

TEST(EngineChoice, NoMpiEngineSaysWhy) {
  for (MemoryKind memory : {MemoryKind::host, MemoryKind::device}) {
    const auto choice = choose_remote_engine(memory, false, EngineKind::rma, kNoMpirun);
    EXPECT_EQ(choice.engine, RemoteEngine::none);
    EXPECT_EQ(choice.why_none, kNoMpirun);
  }
  EXPECT_STREQ(aperture::detail::remote_engine_name(RemoteEngine::nvshmem), "nvshmem");
}

TEST(EngineChoice, OneNodeOpensNoMpiEngine) {
  aperture::Team team = aperture::Team::single();
  EXPECT_EQ(aperture::detail::engine_unavailable(team), "the job runs on one node");
  EXPECT_FALSE(aperture::detail::open_engine_over_host_memory(team, nullptr, 0));
}

// A fake engine: records where requests go and how often it is closed.
struct FakeEngine {
  std::vector<std::uint64_t> offsets;
  int closes = 0;
};

void fake_call(void* context, const aperture::EngineRequest& request, void*) {
  static_cast<FakeEngine*>(context)->offsets.push_back(request.offset);
}

aperture::detail::OpenEngine fake_open(const std::shared_ptr<FakeEngine>& fake) {
  aperture::detail::OpenEngine opened;
  opened.channel.context = fake.get();
  opened.channel.host_call = &fake_call;
  opened.owner = fake;
  opened.close = [](aperture::detail::OpenEngine& engine) {
    auto state = std::static_pointer_cast<FakeEngine>(std::const_pointer_cast<void>(engine.owner));
    ++state->closes;
    engine = {};
  };
  return opened;
}

TEST(EngineAttachment, AnAllocationsMapAndViewsCarryItsEngineWhichClosesOnce) {
  aperture::Team team = aperture::Team::single();
  std::vector<char> memory(1024);
  aperture::Allocation a;
  a.ptr = memory.data();
  a.bytes = memory.size();
  a.map = aperture::SymmetricAddressMap::from_table("test", 0, {reinterpret_cast<std::int64_t>(a.ptr)}, a.bytes);
  auto fake = std::make_shared<FakeEngine>();
  aperture::detail::LiveAllocations<int> live;
  live.add(a, 7, aperture::detail::EngineAttachment(fake_open(fake)));

  ASSERT_TRUE(a.map.engine().attached());
  a.map.engine().host_call(a.map.engine().context, aperture::EngineRequest{.offset = 16}, nullptr);
  auto view = live.view_of("test", memory.data() + 256, 128, [&](std::vector<std::int64_t> table) {
    return aperture::SymmetricAddressMap::from_table("test", 0, std::move(table), 128);
  });
  ASSERT_TRUE(view.has_value());
  const aperture::EngineChannel channel = view->engine();
  ASSERT_TRUE(channel.attached());
  EXPECT_EQ(channel.base_offset, 256u);  // a view's requests land at its offset in the allocation
  channel.host_call(channel.context, aperture::EngineRequest{.offset = channel.base_offset + 8}, nullptr);
  EXPECT_EQ(fake->offsets, (std::vector<std::uint64_t>{16, 264}));

  auto entry = live.take_for_free(team, "test", a);
  EXPECT_EQ(fake->closes, 0);
  entry.engine.close();
  EXPECT_EQ(fake->closes, 1);
  entry.engine.release();  // already closed: nothing more
  EXPECT_EQ(fake->closes, 1);
}

}  // namespace
