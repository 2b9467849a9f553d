// The collectives on every host provider's memory: barrier, broadcast, all-gather,
// reduce-scatter, all-reduce (one-shot, two-shot, automatic) and all-to-all, for float, double,
// int32 and int64, sum/min/max, in place and out of place, with the default staging and with a
// tiny one that cuts every call into many pieces (many barriers per call). Every element of
// every result is checked against values every rank computes for every other rank from one
// seed, drawn fresh each run by rank 0 (printed, so a failure can be replayed with
// APERTURE_TEST_SEED).
#include <gtest/gtest.h>

#include <aperture/collectives/collectives.h>

#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "host_provider_test.h"
#include "../common/test_seed.h"

namespace {

using aperture::AllReduceAlgorithm;
using aperture::Communicator;
using aperture::ReduceOp;
using test::world;

std::uint64_t the_seed() {
  static const std::uint64_t seed = [] {
    const std::uint64_t s = test::agreed_seed(world());
    if (world().rank() == 0) std::printf("collectives_test: seed %#" PRIx64 " (replay with APERTURE_TEST_SEED)\n", s);
    return s;
  }();
  return seed;
}

// Rank `rank`'s element i of buffer `salt`: random, but the same on every rank that asks.
// Floats in [-1, 1); integers in [-10^6, 10^6], so 8 ranks' sums fit every type.
template <class T>
T value(int rank, std::uint64_t salt, std::uint64_t i) {
  const std::uint64_t h = test::draw(the_seed(), rank, salt, i);
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(static_cast<double>(h >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  } else {
    return static_cast<T>(static_cast<std::int64_t>(h % 2000001) - 1000000);
  }
}

template <class T>
T combine(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::sum: return static_cast<T>(a + b);
    case ReduceOp::min: return b < a ? b : a;
    default: return a < b ? b : a;
  }
}

// in[i] of every rank folded in rank order, as the collectives do.
template <class T>
T folded(ReduceOp op, std::uint64_t salt, std::uint64_t i) {
  T acc = value<T>(0, salt, i);
  for (int r = 1; r < world().size(); ++r) acc = combine(op, acc, value<T>(r, salt, i));
  return acc;
}

// Counts wrong elements; the first one's description goes into the failure message.
struct Mismatches {
  std::uint64_t wrong = 0, checked = 0;
  std::string first;
  template <class T>
  void expect(const T& got, const T& expected, const std::string& where) {
    ++checked;
    if (got == expected) return;
    if (wrong++ == 0) first = where + ": got " + std::to_string(got) + ", expected " + std::to_string(expected);
  }
};

// The element counts every collective runs at: empty, below one vector, odd, one piece, several
// pieces of the tiny staging, and several of the default one for a few.
const std::vector<std::uint64_t> kCounts = {0, 1, 3, 17, 1000, 4099};

class CollectivesTest : public test::HostProviderTest {
 protected:
  void SetUp() override {
    HostProviderTest::SetUp();
    if (!provider_) return;  // skipped, or the provider is unknown
    comm_ = std::make_unique<Communicator>(*provider_, world());
    Communicator::Options tiny;
    tiny.half_bytes = 256 * static_cast<std::size_t>(n_);  // the least there is: many pieces per call
    tiny.one_shot_max_bytes = 512;
    tiny.broadcast_ll_max_bytes = 0;  // the staged broadcast at every size, in many pieces
    tiny.broadcast_direct_min_bytes = 0;  // and on a symmetric input the zero-copy one at every size
    tiny_ = std::make_unique<Communicator>(*provider_, world(), tiny);
    Communicator::Options ll;  // the push path at every size (the host's automatic choice never takes it)
    ll.ll_max_bytes = std::numeric_limits<std::size_t>::max();
    ll.broadcast_ll_max_bytes = std::numeric_limits<std::size_t>::max();  // the push broadcast, in pieces too
    ll_ = std::make_unique<Communicator>(*provider_, world(), ll);
  }
  void TearDown() override {
    ll_.reset();
    tiny_.reset();
    comm_.reset();
    provider_.reset();
  }
  std::vector<Communicator*> communicators() { return {comm_.get(), tiny_.get(), ll_.get()}; }
  // A unique salt per buffer, so no two calls see the same data.
  std::uint64_t next_salt() { return ++salt_ * 7919; }

  template <class T>
  std::vector<T> input(std::uint64_t salt, std::uint64_t count) {
    std::vector<T> v(count);
    for (std::uint64_t i = 0; i < count; ++i) v[i] = value<T>(me_, salt, i);
    return v;
  }

  void report(const Mismatches& m, const std::string& what) {
    EXPECT_EQ(m.wrong, 0u) << "rank " << me_ << " of " << n_ << ", " << GetParam() << ", " << what << ": " << m.wrong
                           << " of " << m.checked << " elements wrong; first: " << m.first;
    checked_ += m.checked;
  }

  template <class T>
  void all_reduce_cases() {
    for (Communicator* comm : communicators())
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max})
        for (AllReduceAlgorithm algo :
             {AllReduceAlgorithm::one_shot, AllReduceAlgorithm::two_shot, AllReduceAlgorithm::ll,
              AllReduceAlgorithm::automatic})
          for (std::uint64_t count : kCounts)
            for (bool in_place : {false, true}) {
              const std::uint64_t salt = next_salt();
              std::vector<T> in = input<T>(salt, count);
              std::vector<T> out(count, T(-7));
              T* dst = in_place ? in.data() : out.data();
              comm->all_reduce(in.data(), dst, count, op, algo);
              Mismatches m;
              for (std::uint64_t i = 0; i < count; ++i) m.expect(dst[i], folded<T>(op, salt, i), "element " + std::to_string(i));
              report(m, std::string("all_reduce<") + aperture::name_of(aperture::data_type_of_v<T>) + "> " +
                            aperture::name_of(op) + " " + aperture::name_of(algo) + " count " + std::to_string(count) +
                            (in_place ? " in place" : "") + " half " + std::to_string(comm->options().half_bytes));
            }
  }

  template <class T>
  void reduce_scatter_cases() {
    for (Communicator* comm : communicators())
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max})
        for (std::uint64_t count : kCounts)
          for (bool in_place : {false, true}) {
            const std::uint64_t salt = next_salt();
            std::vector<T> in = input<T>(salt, count * n_);
            std::vector<T> out(count, T(-7));
            T* dst = in_place ? in.data() + me_ * count : out.data();
            comm->reduce_scatter(in.data(), dst, count, op);
            Mismatches m;
            for (std::uint64_t i = 0; i < count; ++i)
              m.expect(dst[i], folded<T>(op, salt, me_ * count + i), "element " + std::to_string(i));
            report(m, std::string("reduce_scatter<") + aperture::name_of(aperture::data_type_of_v<T>) + "> " +
                          aperture::name_of(op) + " count " + std::to_string(count) + (in_place ? " in place" : "") +
                          (comm->uses_ll(count * n_ * sizeof(T)) ? " ll" : ""));
          }
  }

  template <class T>
  void movement_cases() {
    for (Communicator* comm : communicators())
      for (std::uint64_t count : kCounts)
        for (bool in_place : {false, true}) {
          const std::string suffix = std::string("<") + aperture::name_of(aperture::data_type_of_v<T>) + "> count " +
                                     std::to_string(count) + (in_place ? " in place" : "") + " half " +
                                     std::to_string(comm->options().half_bytes) +
                                     (comm->uses_ll(count * sizeof(T)) ? " ll" : "");
          {  // all-gather
            const std::uint64_t salt = next_salt();
            std::vector<T> out(count * n_, T(-7));
            std::vector<T> in = input<T>(salt, count);
            if (in_place) std::copy(in.begin(), in.end(), out.begin() + me_ * count);
            comm->all_gather(in_place ? out.data() + me_ * count : in.data(), out.data(), count);
            Mismatches m;
            for (int r = 0; r < n_; ++r)
              for (std::uint64_t i = 0; i < count; ++i)
                m.expect(out[r * count + i], value<T>(r, salt, i), "from rank " + std::to_string(r) + " element " + std::to_string(i));
            report(m, "all_gather" + suffix);
          }
          {  // all-to-all
            const std::uint64_t salt = next_salt();
            std::vector<T> in = input<T>(salt, count * n_);
            std::vector<T> out(count * n_, T(-7));
            T* dst = in_place ? in.data() : out.data();
            comm->all_to_all(in.data(), dst, count);
            Mismatches m;
            for (int r = 0; r < n_; ++r)
              for (std::uint64_t i = 0; i < count; ++i)
                m.expect(dst[r * count + i], value<T>(r, salt, me_ * count + i),
                         "from rank " + std::to_string(r) + " element " + std::to_string(i));
            report(m, "all_to_all" + suffix);
          }
          for (int root = 0; root < n_; ++root) {  // broadcast from every root
            const std::uint64_t salt = next_salt();
            std::vector<T> in = input<T>(salt, count);
            std::vector<T> out(count, T(-7));
            T* dst = in_place ? in.data() : out.data();
            comm->broadcast(in.data(), dst, count, root);
            Mismatches m;
            for (std::uint64_t i = 0; i < count; ++i) m.expect(dst[i], value<T>(root, salt, i), "element " + std::to_string(i));
            report(m, "broadcast root " + std::to_string(root) + suffix +
                          (comm->broadcast_uses_ll(count * sizeof(T)) ? " broadcast ll" : ""));
          }
        }
  }

  std::unique_ptr<Communicator> comm_, tiny_, ll_;
  std::uint64_t salt_ = 0;
  std::uint64_t checked_ = 0;
};

TEST_P(CollectivesTest, BarrierOrdersWritesBeforeIt) {
  // Each round every rank writes its round number into its slot of every peer's buffer, and
  // after the barrier finds every peer's number there: nobody left the barrier early.
  aperture::Allocation a = provider_->allocate(static_cast<std::size_t>(n_) * sizeof(std::int64_t));
  auto* slots = a.as<std::int64_t>();
  for (int r = 0; r < n_; ++r) slots[r] = -1;
  world().barrier();
  Mismatches m;
  for (int round = 0; round < 50; ++round) {
    for (int r = 0; r < n_; ++r) aperture::store(slots + me_, std::int64_t{round * 1000 + me_}, me_, r, a.map.peer_bases());
    comm_->barrier();
    for (int r = 0; r < n_; ++r) m.expect(slots[r], std::int64_t{round * 1000 + r}, "round " + std::to_string(round) + " slot " + std::to_string(r));
    comm_->barrier();  // nobody writes the next round before everyone has read this one
  }
  report(m, "barrier");
  world().barrier();
  provider_->free(a);
}

// The push (LL) path over many consecutive calls whose sizes change, interleaved with staged
// calls on the same scratch (they share the epochs): every epoch parity is reused many times,
// by calls both larger and smaller than the last one, so a line left from an earlier call
// would be read as fresh here.
TEST_P(CollectivesTest, LLManyCallsChangingSizes) {
  const std::vector<std::uint64_t> sizes = {1, 4099, 3, 2048, 17, 0, 1000, 2049, 5, 4099, 2, 333};
  Mismatches m;
  for (int call = 0; call < 240; ++call) {
    const std::uint64_t count = sizes[static_cast<std::size_t>(call * 7) % sizes.size()];
    const std::uint64_t salt = next_salt();
    const std::string what = "call " + std::to_string(call) + " count " + std::to_string(count);
    switch (call % 5) {
      case 0:
      case 3: {
        std::vector<float> in = input<float>(salt, count), out(count, -7.0f);
        const AllReduceAlgorithm algo = call % 15 == 3 ? AllReduceAlgorithm::two_shot : AllReduceAlgorithm::ll;
        ll_->all_reduce(in.data(), out.data(), count, ReduceOp::sum, algo);
        const std::string where = std::string("all_reduce ") + aperture::name_of(algo) + " " + what;
        for (std::uint64_t i = 0; i < count; ++i) m.expect(out[i], folded<float>(ReduceOp::sum, salt, i), where);
        break;
      }
      case 1: {
        std::vector<std::int32_t> in = input<std::int32_t>(salt, count), out(count * n_, -7);
        ll_->all_gather(in.data(), out.data(), count);
        const std::string where = "all_gather " + what;
        for (int r = 0; r < n_; ++r)
          for (std::uint64_t i = 0; i < count; ++i) m.expect(out[r * count + i], value<std::int32_t>(r, salt, i), where);
        break;
      }
      case 2: {
        std::vector<double> in = input<double>(salt, count * n_), out(count, -7.0);
        ll_->reduce_scatter(in.data(), out.data(), count, ReduceOp::max);
        const std::string where = "reduce_scatter " + what;
        for (std::uint64_t i = 0; i < count; ++i) m.expect(out[i], folded<double>(ReduceOp::max, salt, me_ * count + i), where);
        break;
      }
      default: {
        std::vector<std::int64_t> in = input<std::int64_t>(salt, count), out(count, -7);
        ll_->all_reduce(in.data(), out.data(), count, ReduceOp::min, AllReduceAlgorithm::one_shot);
        const std::string where = "all_reduce one-shot " + what;
        for (std::uint64_t i = 0; i < count; ++i) m.expect(out[i], folded<std::int64_t>(ReduceOp::min, salt, i), where);
        break;
      }
    }
  }
  report(m, "LL calls of changing sizes");
}

// The push broadcast over many calls in a row: roots that change (the same root several times
// running, so it reuses both halves of its slots on acknowledgements alone, then another),
// sizes from one element to several pieces, in place on the root or not, with staged and LL
// collectives of the shared epochs in between. A line stored over one a peer had not consumed,
// or a stale line taken as fresh, would show as a wrong element of some call.
TEST_P(CollectivesTest, BroadcastLLManyCallsChangingRoots) {
  const std::vector<std::uint64_t> sizes = {1, 2049, 3, 1024, 17, 0, 4099, 2, 1000, 5};
  Mismatches m;
  for (int call = 0; call < 300; ++call) {
    const std::uint64_t count = sizes[static_cast<std::size_t>(call * 3) % sizes.size()];
    const int root = (call / 4 + call % 2) % n_;
    const bool in_place = call % 3 == 0;
    const std::uint64_t salt = next_salt();
    std::vector<std::uint32_t> in = input<std::uint32_t>(salt, count), out(count, 0xdeadbeefu);
    std::uint32_t* dst = in_place ? in.data() : out.data();
    ll_->broadcast(in.data(), dst, count, root);
    const std::string what = "call " + std::to_string(call) + " root " + std::to_string(root) + " count " +
                             std::to_string(count) + (in_place ? " in place" : "");
    for (std::uint64_t i = 0; i < count; ++i)
      m.expect(dst[i], value<std::uint32_t>(root, salt, i), "broadcast " + what + " element " + std::to_string(i));
    if (call % 7 == 6) {  // a staged call and an LL one of the shared epochs in between
      const std::uint64_t s2 = next_salt();
      std::vector<std::int64_t> a = input<std::int64_t>(s2, 33), g(33 * n_, -7);
      ll_->all_gather(a.data(), g.data(), 33);
      comm_->all_gather(a.data(), g.data(), 33);
      for (int r = 0; r < n_; ++r)
        for (std::uint64_t i = 0; i < 33; ++i) m.expect(g[r * 33 + i], value<std::int64_t>(r, s2, i), "all_gather after " + what);
    }
    if (call % 11 == 10) {  // the default Communicator's broadcast, on its own push path
      const std::uint64_t s3 = next_salt();
      std::vector<double> b = input<double>(s3, 77), o(77, -7.0);
      comm_->broadcast(b.data(), o.data(), 77, (root + 1) % n_);
      for (std::uint64_t i = 0; i < 77; ++i) m.expect(o[i], value<double>((root + 1) % n_, s3, i), "default broadcast after " + what);
    }
  }
  report(m, "push broadcast, many calls");
}

// The zero-copy forms (the input is itself symmetric, peers read it in place): every size of
// kCounts and a few pieces more, on the default and the tiny staging (many pieces, each without a
// barrier), in place (all-gather, broadcast) and where they fall back to the staged path
// (reductions with `out` overlapping `in`, broadcast with root's), with staged calls in between on
// the same scratch. The default Communicator broadcasts the small sizes on its push path.
TEST_P(CollectivesTest, SymmetricInputsAreReadInPlace) {
  std::vector<std::uint64_t> counts = kCounts;
  counts.push_back(70000);  // several pieces of the default staging
  const std::uint64_t most = *std::max_element(counts.begin(), counts.end());
  aperture::Allocation a = provider_->allocate(most * static_cast<std::uint64_t>(n_) * sizeof(std::int64_t));
  Mismatches m;
  for (Communicator* comm : {comm_.get(), tiny_.get()})
    for (std::uint64_t count : counts)
      for (bool in_place : {false, true}) {
        const std::string what = "count " + std::to_string(count) + (in_place ? " in place" : "") + " half " +
                                 std::to_string(comm->options().half_bytes);
        auto* sym = a.as<std::int64_t>();
        {  // all-gather: in place, `in` is this rank's block of a symmetric `out`
          const std::uint64_t salt = next_salt();
          std::vector<std::int64_t> in = input<std::int64_t>(salt, count), out(count * n_, -7);
          std::int64_t* dst = in_place ? sym : out.data();
          std::int64_t* src = in_place ? sym + me_ * count : sym;
          std::copy(in.begin(), in.end(), src);
          comm->all_gather(src, a.map, dst, count, aperture::DataType::int64);
          for (int r = 0; r < n_; ++r)
            for (std::uint64_t i = 0; i < count; ++i)
              m.expect(dst[r * count + i], value<std::int64_t>(r, salt, i), "all_gather " + what);
        }
        comm->barrier();  // an epoch of another kind in between
        {  // reduce-scatter (in place: the staged path)
          const std::uint64_t salt = next_salt();
          std::vector<std::int64_t> in = input<std::int64_t>(salt, count * n_), out(count, -7);
          std::copy(in.begin(), in.end(), sym);
          std::int64_t* dst = in_place ? sym + me_ * count : out.data();
          comm->reduce_scatter(sym, a.map, dst, count, aperture::DataType::int64, ReduceOp::max);
          for (std::uint64_t i = 0; i < count; ++i)
            m.expect(dst[i], folded<std::int64_t>(ReduceOp::max, salt, me_ * count + i), "reduce_scatter " + what);
        }
        {  // all-reduce (in place: the staged path)
          const std::uint64_t salt = next_salt();
          std::vector<std::int64_t> in = input<std::int64_t>(salt, count), out(count, -7);
          std::copy(in.begin(), in.end(), sym);
          std::int64_t* dst = in_place ? sym : out.data();
          comm->all_reduce(sym, a.map, dst, count, aperture::DataType::int64, ReduceOp::sum,
                           AllReduceAlgorithm::one_shot);
          for (std::uint64_t i = 0; i < count; ++i)
            m.expect(dst[i], folded<std::int64_t>(ReduceOp::sum, salt, i), "all_reduce " + what);
        }
        for (int root = 0; root < n_; ++root) {  // broadcast from every root; only root's `sym` is read
          world().barrier();                     // every peer has read `sym` before it is rewritten
          const std::uint64_t salt = next_salt();
          std::vector<std::int64_t> in = input<std::int64_t>(salt, count), out(count, -7);
          if (me_ == root) std::copy(in.begin(), in.end(), sym);
          else std::fill(sym, sym + count, std::int64_t{-5});
          std::int64_t* dst = in_place ? sym : out.data();
          comm->broadcast(sym, a.map, dst, count, aperture::DataType::int64, root);
          for (std::uint64_t i = 0; i < count; ++i)
            m.expect(dst[i], value<std::int64_t>(root, salt, i), "broadcast from " + std::to_string(root) + " " + what);
        }
        world().barrier();  // `sym` is rewritten next: every peer has read it (the calls ensure it too)
      }
  report(m, "symmetric inputs");
  // broadcast checks its root as the staged form does; an `out` overlapping root's `in` (not in
  // place) fails on every rank, naming root, and the Communicator works on afterwards.
  auto* sym = a.as<std::int64_t>();
  const std::string no_root = test::error_of(
      [&] { comm_->broadcast(sym, a.map, sym, 1, aperture::DataType::int64, n_); });
  EXPECT_NE(no_root.find("is not a rank of this team"), std::string::npos) << no_root;
  constexpr std::uint64_t kOverlapCount = 60000;  // past the push path's sizes; sym + 1 fits the allocation
  const int last = n_ - 1;
  std::vector<std::int64_t> apart(kOverlapCount);
  const std::string overlapping = test::error_of([&] {
    comm_->broadcast(sym, a.map, me_ == last ? sym + 1 : apart.data(), kOverlapCount, aperture::DataType::int64, last);
  });
  EXPECT_NE(overlapping.find("on root " + std::to_string(last) + " `out` overlaps `in`"), std::string::npos) << overlapping;
  world().barrier();
  const std::uint64_t salt = next_salt();
  if (me_ == last) {
    const std::vector<std::int64_t> in = input<std::int64_t>(salt, kOverlapCount);
    std::copy(in.begin(), in.end(), sym);
  }
  comm_->broadcast(sym, a.map, apart.data(), kOverlapCount, aperture::DataType::int64, last);
  Mismatches after;
  for (std::uint64_t i = 0; i < kOverlapCount; ++i)
    after.expect(apart[i], value<std::int64_t>(last, salt, i), "broadcast after the refused one");
  report(after, "broadcast after a refusal");
  // A map of another rank count, or an `in` outside the allocation, is refused.
  std::int64_t x = 0;
  const std::string outside = test::error_of(
      [&] { comm_->all_gather(&x, a.map, a.as<std::int64_t>(), 1, aperture::DataType::int64); });
  EXPECT_NE(outside.find("does not lie inside"), std::string::npos) << outside;
  world().barrier();
  provider_->free(a);
}

TEST_P(CollectivesTest, AllReduceFloat) { all_reduce_cases<float>(); }
TEST_P(CollectivesTest, AllReduceDouble) { all_reduce_cases<double>(); }
TEST_P(CollectivesTest, AllReduceInt32) { all_reduce_cases<std::int32_t>(); }
TEST_P(CollectivesTest, AllReduceInt64) { all_reduce_cases<std::int64_t>(); }
TEST_P(CollectivesTest, ReduceScatterEveryType) {
  reduce_scatter_cases<float>();
  reduce_scatter_cases<double>();
  reduce_scatter_cases<std::int32_t>();
  reduce_scatter_cases<std::int64_t>();
}
TEST_P(CollectivesTest, AllGatherAllToAllBroadcastEveryType) {
  movement_cases<float>();
  movement_cases<double>();
  movement_cases<std::int32_t>();
  movement_cases<std::int64_t>();
}

TEST_P(CollectivesTest, LargeAllReduceCrossesTheThreshold) {
  // 1 MiB per rank: above the default one-shot limit from 3 ranks on (automatic picks
  // two-shot) and four pieces of the default staging; both give bit-identical results.
  constexpr std::uint64_t kCount = (1u << 20) / sizeof(float);
  EXPECT_EQ(comm_->choose_all_reduce(kCount * sizeof(float)),
            n_ <= 2 ? AllReduceAlgorithm::one_shot : AllReduceAlgorithm::two_shot);
  EXPECT_EQ(comm_->choose_all_reduce(1024), AllReduceAlgorithm::one_shot);
  // Host memory: the push (LL) path only where asked for (Options::ll_max_bytes).
  EXPECT_FALSE(comm_->uses_ll(64));
  EXPECT_EQ(comm_->options().ll_max_bytes, std::optional<std::size_t>(0));
  EXPECT_TRUE(ll_->uses_ll(std::size_t{1} << 40));
  EXPECT_EQ(ll_->choose_all_reduce(kCount * sizeof(float)), AllReduceAlgorithm::ll);
  const std::uint64_t salt = next_salt();
  const std::vector<float> in = input<float>(salt, kCount);
  std::vector<float> one(kCount), two(kCount);
  comm_->all_reduce(in.data(), one.data(), kCount, ReduceOp::sum, AllReduceAlgorithm::one_shot);
  comm_->all_reduce(in.data(), two.data(), kCount, ReduceOp::sum);
  Mismatches m;
  for (std::uint64_t i = 0; i < kCount; ++i) {
    const float expected = folded<float>(ReduceOp::sum, salt, i);
    m.expect(one[i], expected, "one-shot element " + std::to_string(i));
    m.expect(two[i], expected, "automatic element " + std::to_string(i));
  }
  report(m, "large all_reduce");
}

TEST_P(CollectivesTest, BadCallsAreRefusedWithTheReason) {
  float x = 0;
  const std::string bad_root = test::error_of([&] { comm_->broadcast(&x, &x, 1, n_); });
  EXPECT_NE(bad_root.find("root " + std::to_string(n_) + " is not a rank"), std::string::npos) << bad_root;
  const std::string stream = test::error_of([&] {
    comm_->all_reduce(&x, &x, 1, aperture::DataType::float32, ReduceOp::sum, AllReduceAlgorithm::automatic,
                      reinterpret_cast<aperture::Stream>(0x10));
  });
  EXPECT_NE(stream.find("pass no stream"), std::string::npos) << stream;
  // Every DataType runs on host memory too (element_types_test.cpp); a value outside the enum does not.
  const std::string type = test::error_of(
      [&] { comm_->all_reduce(&x, &x, 1, static_cast<aperture::DataType>(77), ReduceOp::sum); });
  EXPECT_NE(type.find("DataType 77 is not one of"), std::string::npos) << type;
  const std::string null = test::error_of([&] { comm_->all_gather<float>(nullptr, &x, 1); });
  EXPECT_NE(null.find("null buffer"), std::string::npos) << null;
  Communicator::Options small;
  small.half_bytes = 16;
  const std::string tiny = test::error_of([&] { Communicator c(*provider_, world(), small); });
  EXPECT_NE(tiny.find("too small"), std::string::npos) << tiny;
  // The GPU kernels are compiled for at most 512 threads a block (__launch_bounds__).
  Communicator::Options wide;
  wide.block_threads = 1024;
  const std::string threads = test::error_of([&] { Communicator c(*provider_, world(), wide); });
  EXPECT_NE(threads.find("from 32 to 512"), std::string::npos) << threads;
  // Ranks that disagree on the options are told so, on every rank, before any memory is taken.
  Communicator::Options differ;
  differ.one_shot_max_bytes = 1024 + static_cast<std::size_t>(me_);
  if (n_ > 1) {
    const std::string mismatch = test::error_of([&] { Communicator c(*provider_, world(), differ); });
    EXPECT_NE(mismatch.find("one_shot_max_bytes"), std::string::npos) << mismatch;
  }
  comm_->barrier();  // still in step after the refusals
}

// ag_gemm / gemm_rs run on GPUs only: on host memory the constructor refuses before taking any
// memory, naming the provider and what to use instead (invalid_argument in a CUDA build,
// unavailable in one without CUDA or cuBLASLt). The GPU behaviour: gpu_gemm_test.cu.
TEST_P(CollectivesTest, OverlappedGemmRefusesHostMemory) {
  const test::Refusal r = test::refusal_of([&] { aperture::OverlappedGemm tp(*provider_, world()); });
  ASSERT_TRUE(r.code.has_value()) << r.message;
  EXPECT_TRUE(*r.code == aperture::ErrorCode::invalid_argument || *r.code == aperture::ErrorCode::unavailable) << r.message;
  EXPECT_TRUE(test::contains(r.message, "OverlappedGemm")) << r.message;
  EXPECT_TRUE(test::contains(r.message, "serves host memory") || test::contains(r.message, "built without CUDA")) << r.message;
  comm_->barrier();  // still in step after the refusal
}

TEST_P(CollectivesTest, ManyCallsReuseTheScratch) {
  // Calls of every kind back to back, alternating the staging halves many times over.
  Mismatches m;
  for (int round = 0; round < 200; ++round) {
    const std::uint64_t salt = next_salt();
    const std::uint64_t count = 1 + static_cast<std::uint64_t>(round % 37);
    std::vector<std::int64_t> in = input<std::int64_t>(salt, count * n_), out(count * n_);
    switch (round % 3) {
      case 0:
        tiny_->all_reduce(in.data(), out.data(), count, ReduceOp::sum);
        for (std::uint64_t i = 0; i < count; ++i) m.expect(out[i], folded<std::int64_t>(ReduceOp::sum, salt, i), "ar");
        break;
      case 1:
        comm_->all_to_all(in.data(), out.data(), count);
        for (int r = 0; r < n_; ++r)
          for (std::uint64_t i = 0; i < count; ++i) m.expect(out[r * count + i], value<std::int64_t>(r, salt, me_ * count + i), "a2a");
        break;
      default:
        tiny_->reduce_scatter(in.data(), out.data(), count, ReduceOp::max);
        for (std::uint64_t i = 0; i < count; ++i) m.expect(out[i], folded<std::int64_t>(ReduceOp::max, salt, me_ * count + i), "rs");
    }
  }
  report(m, "many calls");
}

INSTANTIATE_TEST_SUITE_P(HostProviders, CollectivesTest, test::host_providers(), test::provider_test_name);

}  // namespace
