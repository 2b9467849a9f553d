// Bad input that leaves the Team usable: each case is refused with an aperture::Error on every
// rank involved, naming the value and what to do, without a hang, and the next collective call
// works (the fixture's TearDown frees through the same provider). docs/RELIABILITY.md lists
// every class of bad input and the test that proves it; the cases that end a job are in
// collective_faults.cpp, env_misuse.sh and kill_rank.sh.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../common/env_override.h"
#include "../multirank/world.h"
#include "bootstrap/launched_by.h"  // who started this process

namespace {

using aperture::ErrorCode;
using test::refusal_of;
using test::world;

void expect_mentions(const std::string& message, std::initializer_list<std::string> needles) {
  EXPECT_NE(message, "(no error)");
  for (const auto& needle : needles) EXPECT_NE(message.find(needle), std::string::npos) << "'" << needle << "' in: " << message;
}

// A refusal of the kind `code` whose message mentions every needle.
void expect_refused(ErrorCode code, const test::Refusal& refusal, std::initializer_list<std::string> needles) {
  expect_mentions(refusal.message, needles);
  EXPECT_EQ(refusal.code, code) << "code of: " << refusal.message;
}

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    provider_ = aperture::make_provider("shm", world());
    me_ = world().rank();
    n_ = world().size();
    last_ = n_ - 1;
    started_ = std::chrono::steady_clock::now();
  }
  void TearDown() override {
    // No case may hang until a timeout: each is refused at once.
    EXPECT_LT(std::chrono::steady_clock::now() - started_, std::chrono::seconds(20));
    world().barrier();  // the Team still works
    // And so does the provider: a fresh allocation, checked through a neighbour.
    aperture::Allocation a = provider_->allocate(64);
    a.as<int>()[0] = me_;
    world().barrier();
    const int next = (me_ + 1) % n_;
    EXPECT_EQ(aperture::load(a.as<int>(), me_, next, a.map.peer_bases()), next);
    world().barrier();
    provider_->free(a);
  }
  std::unique_ptr<aperture::Provider> provider_;
  int me_ = 0, n_ = 1, last_ = 0;
  std::chrono::steady_clock::time_point started_;
};

TEST_F(BadInput, DifferentAlignmentsOnDifferentRanks) {
  if (n_ < 2) GTEST_SKIP() << "a mismatch needs two ranks";
  const std::size_t alignment = me_ == last_ ? 512 : 256;
  expect_refused(ErrorCode::mismatch, refusal_of([&] { provider_->allocate(4096, alignment); }),
                 {"mismatch", "alignment=512", "alignment=256", "rank " + std::to_string(last_)});
}

TEST_F(BadInput, BadAlignmentOnOneRankFailsEveryRankAtOnce) {
  // The bad rank is refused after the comparison, not before it: the others must not wait for it.
  if (n_ < 2) GTEST_SKIP() << "needs two ranks";
  const std::size_t alignment = me_ == last_ ? 3 : 256;
  expect_refused(ErrorCode::mismatch, refusal_of([&] { provider_->allocate(4096, alignment); }),
                 {"mismatch", "alignment=3"});
}

TEST_F(BadInput, BadAlignmentEverywhereIsNamed) {
  expect_refused(ErrorCode::invalid_argument, refusal_of([&] { provider_->allocate(64, 3); }),
                 {"alignment 3 is not a power of two"});
  expect_refused(ErrorCode::invalid_argument, refusal_of([&] { provider_->allocate(64, 0); }),
                 {"alignment 0 is not a power of two"});
  expect_refused(ErrorCode::invalid_argument, refusal_of([&] { provider_->allocate(64, std::size_t{4} << 20); }),
                 {"alignment 4194304 exceeds the largest"});
}

TEST_F(BadInput, AbsurdSizesAreErrorsNotCrashes) {
  expect_refused(ErrorCode::invalid_argument,
                 refusal_of([&] { provider_->allocate(std::numeric_limits<std::size_t>::max()); }),
                 {"larger than any machine's memory"});
  // Larger than the heap but plausible: out of memory, said as such, with the fix.
  expect_refused(ErrorCode::out_of_memory, refusal_of([&] { provider_->allocate(std::size_t{1} << 40); }),
                 {"no free block of 1099511627776 bytes", "APERTURE_HEAP_SIZE"});
}

TEST_F(BadInput, ZeroBytesIsAnAllocationWithNoRoomInIt) {
  aperture::Allocation empty = provider_->allocate(0);
  EXPECT_NE(empty.ptr, nullptr);
  EXPECT_EQ(empty.map.allocation_bytes, 0u);
  EXPECT_TRUE(empty.map.owns(empty.ptr, 0));
  EXPECT_FALSE(empty.map.owns(empty.ptr, 1));
  const int next = (me_ + 1) % n_;
  EXPECT_EQ(aperture::checked_translate(empty.map, empty.as<char>(), next, 0),
            aperture::translate(empty.as<char>(), me_, next, empty.map.peer_bases()));
  expect_refused(ErrorCode::invalid_argument,
                 refusal_of([&] { aperture::checked_translate(empty.map, empty.as<char>(), next, 1); }),
                 {"not inside this allocation"});
  world().allgather(nullptr, nullptr, 0);  // a zero-byte Team call is a pure synchronisation
  provider_->free(empty);
}

TEST_F(BadInput, RankOutOfRange) {
  aperture::Allocation a = provider_->allocate(256);
  for (int bad : {-1, n_, n_ + 100})
    expect_refused(ErrorCode::invalid_argument,
                   refusal_of([&] { aperture::checked_translate(a.map, a.as<char>(), bad); }),
                   {"to_rank " + std::to_string(bad) + " is out of range", "0.." + std::to_string(n_ - 1)});
  EXPECT_FALSE(a.map.is_direct(n_));
  EXPECT_FALSE(a.map.peer_view().is_direct(-1));
  expect_refused(ErrorCode::invalid_argument, refusal_of([&] { world().broadcast(nullptr, 0, n_); }),
                 {"root " + std::to_string(n_) + " is out of range"});
  EXPECT_FALSE(world().same_node(n_));
  provider_->free(a);
}

TEST_F(BadInput, PointerOrRangeNotOwnedByTheMap) {
  aperture::Allocation a = provider_->allocate(256);
  int on_the_stack = 0;
  expect_refused(ErrorCode::invalid_argument,
                 refusal_of([&] { aperture::checked_translate(a.map, &on_the_stack, me_); }),
                 {"not inside this allocation"});
  expect_refused(ErrorCode::invalid_argument,
                 refusal_of([&] { aperture::checked_translate(a.map, a.as<char>() + 200, me_, 100); }),
                 {"not inside this allocation"});
  expect_refused(ErrorCode::invalid_argument,
                 refusal_of([&] { provider_->symmetric_address_map(&on_the_stack, sizeof on_the_stack); }),
                 {"is not memory of this shm provider's heap"});
  expect_refused(ErrorCode::invalid_argument, refusal_of([&] { provider_->symmetric_address_map(nullptr, 1); }),
                 {"is not memory"});
  provider_->free(a);
}

TEST_F(BadInput, ViewRunningPastItsAllocation) {
  aperture::Allocation a = provider_->allocate(1000);
  expect_refused(ErrorCode::invalid_argument,
                 refusal_of([&] { provider_->symmetric_address_map(a.as<char>() + 990, 11); }),
                 {"not inside a live allocation", "running past the end"});
  expect_refused(ErrorCode::invalid_argument, refusal_of([&] { a.map.view_table(a.as<char>() + 990, 11); }),
                 {"is not inside this allocation"});
  EXPECT_NO_THROW(provider_->symmetric_address_map(a.as<char>() + 990, 10));
  provider_->free(a);
}

TEST_F(BadInput, DoubleFreeOnEveryRank) {
  aperture::Allocation a = provider_->allocate(64);
  aperture::Allocation stale = a;
  provider_->free(a);
  expect_refused(ErrorCode::invalid_argument, refusal_of([&] { provider_->free(stale); }), {"already freed"});
}

TEST_F(BadInput, FreeOfAPointerIntoTheMiddleOfAnAllocation) {
  aperture::Allocation a = provider_->allocate(256);
  aperture::Allocation inside{a.as<char>() + 64, 64, {}};
  expect_refused(ErrorCode::invalid_argument, refusal_of([&] { provider_->free(inside); }),
                 {"not a live allocation", "middle of an allocation"});
  provider_->free(a);
}

TEST_F(BadInput, OneRankFreesSomethingElse) {
  // The last rank frees an allocation it already freed while the others free a live one: every
  // rank is told, nothing is freed, and the live one is freed properly afterwards.
  if (n_ < 2) GTEST_SKIP() << "needs two ranks";
  aperture::Allocation gone = provider_->allocate(64);
  aperture::Allocation stale = gone;
  provider_->free(gone);
  aperture::Allocation live = provider_->allocate(128);
  const test::Refusal refusal = refusal_of([&] { provider_->free(me_ == last_ ? stale : live); });
  // The rank that freed something else is told what it did wrong; the others that ranks differ.
  expect_refused(me_ == last_ ? ErrorCode::invalid_argument : ErrorCode::mismatch, refusal, {"mismatch", "shm free"});
  if (me_ == last_) expect_mentions(refusal.message, {"already freed"});
  EXPECT_NE(live.ptr, nullptr) << "a refused free leaves the allocation alone";
  provider_->free(live);
}

TEST_F(BadInput, FreeOfAnotherProvidersAllocation) {
  auto other = aperture::make_provider("shm", world());  // a second heap: its own memory
  aperture::Allocation a = provider_->allocate(64);
  expect_refused(ErrorCode::invalid_argument, refusal_of([&] { other->free(a); }),
                 {"is not memory of this shm provider's heap", "another provider"});
  std::vector<char> not_ours(64);
  aperture::Allocation foreign{not_ours.data(), 64, {}};
  expect_refused(ErrorCode::invalid_argument, refusal_of([&] { provider_->free(foreign); }),
                 {"is not memory of this shm provider's heap"});
  provider_->free(a);  // the rightful owner still can
}

TEST_F(BadInput, UseAfterFreeOnTheCheckedPath) {
  aperture::Allocation a = provider_->allocate(256);
  const aperture::Allocation copy = a;  // kept past the free: a dangling copy
  const int next = (me_ + 1) % n_;
  EXPECT_NO_THROW(aperture::checked_translate(copy.map, copy.as<char>(), next));
  provider_->free(a);
  EXPECT_EQ(a.ptr, nullptr) << "free resets the allocation it is given";
  EXPECT_TRUE(copy.map.freed());
  expect_refused(ErrorCode::invalid_argument,
                 refusal_of([&] { aperture::checked_translate(copy.map, copy.as<char>(), next); }),
                 {"freed", "use after free"});
  expect_refused(ErrorCode::invalid_argument, refusal_of([&] { copy.map.view_table(copy.ptr, 1); }),
                 {"use after free"});
  expect_refused(ErrorCode::invalid_argument,
                 refusal_of([&] { aperture::checked_translate(a.map, copy.as<char>(), next); }), {"map is empty"});
  expect_refused(ErrorCode::invalid_argument, refusal_of([&] { provider_->symmetric_address_map(copy.ptr, 1); }),
                 {"not inside a live allocation"});
}

TEST_F(BadInput, CollectiveCallsInADifferentOrder) {
  // The last rank frees while the others allocate: the Team compares the calls, names both,
  // and neither happens.
  if (n_ < 2) GTEST_SKIP() << "needs two ranks";
  aperture::Allocation a = provider_->allocate(64);
  std::optional<aperture::Allocation> b;
  const test::Refusal refusal = refusal_of([&] {
    if (me_ == last_)
      provider_->free(a);
    else
      b = provider_->allocate(64);
  });
  expect_refused(ErrorCode::mismatch, refusal, {"mismatch", "shm free", "shm allocate"});
  EXPECT_FALSE(b.has_value());
  EXPECT_NE(a.ptr, nullptr);
  provider_->free(a);
}

TEST_F(BadInput, DifferentProviderNamesOnDifferentRanks) {
  if (n_ < 2) GTEST_SKIP() << "needs two ranks";
  const std::string name = me_ == last_ ? "no-such-provider" : "shm";
  expect_refused(ErrorCode::mismatch, refusal_of([&] { aperture::make_provider(name, world()); }),
                 {"mismatch", "make_provider(shm)", "make_provider(no-such-provider)"});
}

// mpi-window counts as available where the process was started by mpirun (OMPI_COMM_WORLD_SIZE
// is set): setting that on the last rank only makes it available there and nowhere else.
TEST_F(BadInput, AProviderAvailableOnSomeRanksOnlyFailsEveryRank) {
  if (n_ < 2) GTEST_SKIP() << "needs two ranks";
  using aperture::detail::LaunchedBy;
  if (aperture::detail::has_launcher_variables(LaunchedBy::mpirun, aperture::env::process()))
    GTEST_SKIP() << "started by mpirun: available everywhere";
  if (me_ == last_) ::setenv("OMPI_COMM_WORLD_SIZE", std::to_string(n_).c_str(), 1);
  bool available_here = false;
  for (const auto& status : aperture::provider_statuses())
    if (status.name == "mpi-window") available_here = status.available;
  std::vector<std::uint8_t> available(static_cast<std::size_t>(n_));
  const std::uint8_t mine = available_here ? 1 : 0;
  world().allgather(&mine, available.data(), 1);
  if (available[static_cast<std::size_t>(last_)] == 0) {
    if (me_ == last_) ::unsetenv("OMPI_COMM_WORLD_SIZE");
    GTEST_SKIP() << "mpi-window is not built here";
  }
  const test::Refusal refusal = refusal_of([&] { aperture::make_provider("mpi-window", world()); });
  if (me_ == last_) ::unsetenv("OMPI_COMM_WORLD_SIZE");
  expect_refused(ErrorCode::mismatch, refusal, {"mismatch", "make_provider(mpi-window)", "available=0", "available=1"});
  if (me_ != last_)
    expect_mentions(refusal.message,
                    {"On this rank (rank " + std::to_string(me_) + ") provider 'mpi-window' is not available"});
}

TEST_F(BadInput, UnknownProviderListsTheAvailableOnes) {
  expect_refused(ErrorCode::invalid_argument, refusal_of([&] { aperture::make_provider("shmem", world()); }),
                 {"unknown provider 'shmem'", "available here: ", "shm", "aperture info"});
}

TEST_F(BadInput, KnownButUnavailableProviderSaysWhy) {
  std::optional<aperture::ProviderStatus> unavailable;
  for (const auto& status : aperture::provider_statuses())
    if (!status.available) unavailable = status;
  if (!unavailable) GTEST_SKIP() << "every known provider is available here";
  expect_refused(ErrorCode::unavailable, refusal_of([&] { aperture::make_provider(unavailable->name, world()); }),
                 {"provider '" + unavailable->name + "' is not available here", unavailable->reason});
}

TEST_F(BadInput, MalformedHeapSize) {
  for (const char* bad : {"abc", "0", "-5", "12Q", "99999T"}) {
    test::EnvOverride heap_size("APERTURE_HEAP_SIZE", bad);
    expect_refused(ErrorCode::invalid_argument, refusal_of([&] { aperture::make_provider("shm", world()); }),
                   {std::string("APERTURE_HEAP_SIZE='") + bad + "' is not a size", "e.g. 4G"});
  }
}

TEST_F(BadInput, TeamCallsLargerThanTheRendezvousCarries) {
  if (n_ < 2) GTEST_SKIP() << "a team of one rank does not use the rendezvous";
  char dummy = 0;
  const std::size_t huge = (std::size_t{1} << 32) + 1;  // refused before a byte is read
  expect_refused(ErrorCode::invalid_argument, refusal_of([&] { world().allgather(&dummy, &dummy, huge); }),
                 {"4294967297 bytes exceeds the rendezvous limit", "symmetric memory"});
}

TEST_F(BadInput, NonDirectPeerOnTheCheckedPath) {
  // shm reaches every rank of one machine directly; a view of its table with a peer zeroed is
  // what another node looks like (openshmem-nondirect runs the real case under MPI).
  aperture::Allocation a = provider_->allocate(256);
  if (n_ < 2) {
    provider_->free(a);
    GTEST_SKIP() << "needs two ranks";
  }
  auto table = std::vector<std::int64_t>(a.map.host_peer_bases().begin(), a.map.host_peer_bases().end());
  const int other = (me_ + 1) % n_;
  table[other] = 0;
  const auto map = aperture::SymmetricAddressMap::from_table("test", me_, table, a.bytes);
  EXPECT_EQ(map.indirect_peers(), std::vector<int>{other});
  expect_refused(ErrorCode::invalid_argument,
                 refusal_of([&] { aperture::checked_translate(map, a.as<char>(), other); }),
                 {"rank " + std::to_string(other) + " is not directly addressable", "transfer engine"});
  provider_->free(a);
}

TEST_F(BadInput, HostWaitsAskTheJobWatchWhileTeamCallsRunInAnotherThread) {
  // A wait's job watch reads the hub connection only when no Team call holds it: waits in one
  // thread and barriers in another must not mix up the conversation (ThreadSanitizer runs this).
  std::uint64_t never_signalled = 0;
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    while (!done.load()) {
      std::uint64_t seen = 0;
      EXPECT_FALSE(aperture::wait_until_ge_for(&never_signalled, 1, 30'000'000, &seen));  // 30 ms, asking the watch
    }
  });
  for (int i = 0; i < 100; ++i) world().barrier();
  done.store(true);
  waiter.join();
}

}  // namespace
