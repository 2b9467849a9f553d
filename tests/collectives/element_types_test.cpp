// Every element type NCCL has (int8 .. float8_e5m2) with every reduction (sum, prod, min, max,
// avg) through every reduction path of the CPU collectives — all-reduce one-shot, two-shot and
// LL, reduce-scatter staged and LL, and the zero-copy forms on a symmetric input — and every
// type through broadcast, all-gather and all-to-all. Each element of each result is compared,
// bit for bit, with element_reference.h, which computes NCCL's rounding without the library's
// code. Run at 1, 2 and 3 ranks (an odd count: chunks and pieces split unevenly). Values differ
// per rank and per element, from one seed drawn by rank 0 (APERTURE_TEST_SEED replays it).
#include <gtest/gtest.h>

#include <aperture/collectives/collectives.h>
#include <aperture/collectives/detail/tuning.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "element_reference.h"
#include "host_provider_test.h"
#include "../common/test_seed.h"

namespace {

using aperture::AllReduceAlgorithm;
using aperture::Communicator;
using aperture::DataType;
using aperture::ReduceOp;
using test::world;

std::uint64_t the_seed() {
  static const std::uint64_t seed = [] {
    const std::uint64_t s = test::agreed_seed(world());
    if (world().rank() == 0) std::printf("element_types_test: seed %#" PRIx64 " (replay with APERTURE_TEST_SEED)\n", s);
    return s;
  }();
  return seed;
}

// Rank `rank`'s element i of buffer `salt`, as bits.
std::uint64_t bits_of(DataType t, ReduceOp op, int rank, std::uint64_t salt, std::uint64_t i) {
  return reference::element(t, op, test::draw(the_seed(), rank, salt, i));
}

// A buffer of `count` elements of type t, raw.
struct Buffer {
  DataType type;
  std::vector<unsigned char> bytes;
  Buffer(DataType t, std::uint64_t count) : type(t), bytes(count * aperture::size_of(t) + 1, 0x5a) {}
  void* data() { return bytes.data(); }
  void set(std::uint64_t i, std::uint64_t bits) { std::memcpy(&bytes[i * aperture::size_of(type)], &bits, aperture::size_of(type)); }
  std::uint64_t get(std::uint64_t i) const {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &bytes[i * aperture::size_of(type)], aperture::size_of(type));
    return bits;
  }
};

const std::vector<std::uint64_t> kCounts = {1, 3, 17, 1000, 4099};

class ElementTypesTest : public test::HostProviderTest {
 protected:
  void SetUp() override {
    HostProviderTest::SetUp();
    if (!provider_) return;
    comm_ = std::make_unique<Communicator>(*provider_, world());
    Communicator::Options tiny;  // many pieces per call
    tiny.half_bytes = 256 * static_cast<std::size_t>(n_);
    tiny_ = std::make_unique<Communicator>(*provider_, world(), tiny);
    Communicator::Options ll;
    ll.ll_max_bytes = std::numeric_limits<std::size_t>::max();
    ll_ = std::make_unique<Communicator>(*provider_, world(), ll);
  }
  void TearDown() override {
    ll_.reset();
    tiny_.reset();
    comm_.reset();
    provider_.reset();
  }
  std::uint64_t next_salt() { return ++salt_ * 7919; }

  Buffer input(DataType t, ReduceOp op, std::uint64_t salt, std::uint64_t count) {
    Buffer b(t, count);
    for (std::uint64_t i = 0; i < count; ++i) b.set(i, bits_of(t, op, me_, salt, i));
    return b;
  }
  // Element `at` of every rank's buffer `salt`, folded as NCCL would.
  std::uint64_t expected(DataType t, ReduceOp op, std::uint64_t salt, std::uint64_t at) {
    std::vector<std::uint64_t> inputs(static_cast<std::size_t>(n_));
    for (int r = 0; r < n_; ++r) inputs[static_cast<std::size_t>(r)] = bits_of(t, op, r, salt, at);
    return reference::fold(t, op, inputs);
  }
  // Every element of `got` against expected(at = offset + i); the first miss in the message.
  void check(const Buffer& got, std::uint64_t count, const std::string& what, const std::function<std::uint64_t(std::uint64_t)>& want) {
    std::uint64_t wrong = 0;
    std::string first;
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::uint64_t e = want(i), g = got.get(i);
      if (g != e && wrong++ == 0) {
        char line[160];
        std::snprintf(line, sizeof line, "element %" PRIu64 ": bits %#" PRIx64 ", expected %#" PRIx64, i, g, e);
        first = line;
      }
    }
    ++calls_;
    EXPECT_EQ(wrong, 0u) << "rank " << me_ << " of " << n_ << ", " << what << ": " << wrong << " of " << count
                         << " elements wrong; first: " << first;
  }

  std::unique_ptr<Communicator> comm_, tiny_, ll_;
  std::uint64_t salt_ = 0, calls_ = 0;
};

std::string name(DataType t, ReduceOp op) { return std::string(aperture::name_of(t)) + " " + aperture::name_of(op); }

TEST_P(ElementTypesTest, AllReduceEveryTypeAndOp) {
  for (DataType t : aperture::kAllDataTypes)
    for (ReduceOp op : aperture::kAllReduceOps)
      for (auto [comm, algo] : {std::pair{comm_.get(), AllReduceAlgorithm::one_shot}, std::pair{comm_.get(), AllReduceAlgorithm::two_shot},
                                std::pair{tiny_.get(), AllReduceAlgorithm::two_shot}, std::pair{ll_.get(), AllReduceAlgorithm::ll}})
        for (std::uint64_t count : kCounts) {
          const std::uint64_t salt = next_salt();
          Buffer in = input(t, op, salt, count), out(t, count);
          comm->all_reduce(in.data(), out.data(), count, t, op, algo);
          check(out, count, "all_reduce " + name(t, op) + " " + aperture::name_of(algo) + " count " + std::to_string(count),
                [&](std::uint64_t i) { return expected(t, op, salt, i); });
        }
}

TEST_P(ElementTypesTest, ReduceScatterEveryTypeAndOp) {
  for (DataType t : aperture::kAllDataTypes)
    for (ReduceOp op : aperture::kAllReduceOps)
      for (Communicator* comm : {comm_.get(), tiny_.get(), ll_.get()})
        for (std::uint64_t count : kCounts) {
          const std::uint64_t salt = next_salt();
          Buffer in = input(t, op, salt, count * n_), out(t, count);
          comm->reduce_scatter(in.data(), out.data(), count, t, op);
          check(out, count, "reduce_scatter " + name(t, op) + " count " + std::to_string(count) + " half " +
                                std::to_string(comm->options().half_bytes) + (comm == ll_.get() ? " ll" : ""),
                [&](std::uint64_t i) { return expected(t, op, salt, me_ * count + i); });
        }
}

// The zero-copy forms read every rank's input where it lies (a symmetric allocation).
TEST_P(ElementTypesTest, SymmetricInputsEveryTypeAndOp) {
  constexpr std::uint64_t kCount = 1000;
  aperture::Allocation a = provider_->allocate(kCount * static_cast<std::uint64_t>(n_) * 8);
  for (DataType t : aperture::kAllDataTypes)
    for (ReduceOp op : aperture::kAllReduceOps) {
      {
        const std::uint64_t salt = next_salt();
        Buffer in = input(t, op, salt, kCount), out(t, kCount);
        std::memcpy(a.ptr, in.data(), kCount * aperture::size_of(t));
        comm_->all_reduce(a.ptr, a.map, out.data(), kCount, t, op, AllReduceAlgorithm::one_shot);
        check(out, kCount, "all_reduce (symmetric input) " + name(t, op), [&](std::uint64_t i) { return expected(t, op, salt, i); });
      }
      {
        const std::uint64_t salt = next_salt();
        Buffer in = input(t, op, salt, kCount * n_), out(t, kCount);
        std::memcpy(a.ptr, in.data(), kCount * n_ * aperture::size_of(t));
        comm_->reduce_scatter(a.ptr, a.map, out.data(), kCount, t, op);
        check(out, kCount, "reduce_scatter (symmetric input) " + name(t, op),
              [&](std::uint64_t i) { return expected(t, op, salt, me_ * kCount + i); });
      }
      world().barrier();  // every peer has read `a` before it is rewritten
    }
  provider_->free(a);
}

// The zero-copy two-shot all-reduce and all-to-all (the input in a symmetric allocation): types
// and ops of every width, one piece and many (tiny halves), out apart from in and in place (the
// one-shot and all-to-all then run the staged algorithm; two-shot stays zero-copy), and the
// tuning table's own choice. Run at 1 to 4 ranks (collectives.zero_copy).
TEST_P(ElementTypesTest, ZeroCopyTwoShotAndAllToAll) {
  const std::vector<std::pair<DataType, ReduceOp>> cases = {
      {DataType::float32, ReduceOp::sum}, {DataType::bfloat16, ReduceOp::avg}, {DataType::int64, ReduceOp::prod},
      {DataType::uint8, ReduceOp::max},   {DataType::float8_e4m3, ReduceOp::min}, {DataType::float64, ReduceOp::sum},
      {DataType::int32, ReduceOp::min},   {DataType::float16, ReduceOp::prod}};
  const std::uint64_t most = kCounts.back();
  aperture::Allocation a = provider_->allocate(most * static_cast<std::uint64_t>(n_) * 8);
  Communicator::Options one_piece, many_pieces;
  one_piece.all_to_all_direct_min_bytes = 0;  // zero-copy at every size
  many_pieces.all_to_all_direct_min_bytes = 0;
  many_pieces.half_bytes = 256 * static_cast<std::size_t>(n_);
  Communicator zc(*provider_, world(), one_piece), zc_pieces(*provider_, world(), many_pieces);
  const std::vector<std::pair<Communicator*, const char*>> comms = {
      {&zc, "one piece"}, {&zc_pieces, "many pieces"}, {comm_.get(), "the table's choice"}};
  // Element i of `a` as a Buffer (what an in-place call left there).
  const auto read_back = [&](DataType t, std::uint64_t count) {
    Buffer b(t, count);
    std::memcpy(b.data(), a.ptr, count * aperture::size_of(t));
    return b;
  };
  for (const auto& [comm, how] : comms)
    for (const auto& type_and_op : cases)
      for (std::uint64_t count : kCounts) {
        const DataType t = type_and_op.first;  // named copies: lambdas capture them (not bindings)
        const ReduceOp op = type_and_op.second;
        const std::string what = name(t, op) + " count " + std::to_string(count) + ", " + how;
        const std::size_t size = aperture::size_of(t);
        for (bool in_place : {false, true}) {
          for (AllReduceAlgorithm algorithm : {AllReduceAlgorithm::two_shot, AllReduceAlgorithm::one_shot}) {
            if (algorithm == AllReduceAlgorithm::one_shot && !in_place) continue;  // SymmetricInputs* has it
            const std::uint64_t salt = next_salt();
            Buffer in = input(t, op, salt, count), out(t, count);
            std::memcpy(a.ptr, in.data(), count * size);
            comm->all_reduce(a.ptr, a.map, in_place ? a.ptr : out.data(), count, t, op, algorithm);
            const std::string label = std::string("all_reduce ") + aperture::name_of(algorithm) +
                                      (in_place ? " in place" : "") + " (symmetric input) " + what;
            check(in_place ? read_back(t, count) : out, count, label, [&](std::uint64_t i) { return expected(t, op, salt, i); });
            world().barrier();  // every peer has read `a` before it is rewritten
          }
          const std::uint64_t salt = next_salt();
          Buffer in = input(t, ReduceOp::sum, salt, count * n_), out(t, count * n_);
          std::memcpy(a.ptr, in.data(), count * n_ * size);
          comm->all_to_all(a.ptr, a.map, in_place ? a.ptr : out.data(), count, t);
          check(in_place ? read_back(t, count * n_) : out, count * n_,
                std::string("all_to_all") + (in_place ? " in place" : "") + " (symmetric input) " + what,
                [&](std::uint64_t i) { return bits_of(t, ReduceOp::sum, static_cast<int>(i / count), salt, me_ * count + i % count); });
          world().barrier();
        }
      }
  provider_->free(a);
}

// A zero-copy call whose ranks lay out `in` and `out` differently (here the odd ranks overlap
// them, the even ones do not) fails on every rank with an error naming both groups, instead of
// the ranks running different algorithms into a hang; the Communicator works on afterwards.
TEST_P(ElementTypesTest, ZeroCopyLayoutsThatDifferAreRefusedOnEveryRank) {
  if (n_ == 1) GTEST_SKIP() << "one rank cannot disagree with itself";
  constexpr std::uint64_t kCount = 1024;
  constexpr DataType t = DataType::float32;
  const std::uint64_t w = static_cast<std::uint64_t>(n_);
  aperture::Allocation a = provider_->allocate(kCount * w * 4 * 2);
  std::vector<float> elsewhere(kCount * w);
  Communicator::Options options;
  options.all_to_all_direct_min_bytes = 0;
  Communicator zc(*provider_, world(), options);
  const bool overlap = me_ % 2 == 1;
  std::string odd, even;
  for (int r = 0; r < n_; ++r) {
    std::string& list = r % 2 == 1 ? odd : even;
    list += (list.empty() ? "" : ", ") + std::to_string(r);
  }
  auto* base = static_cast<float*>(a.ptr);
  const auto refused = [&](const std::string& what, const std::function<void()>& call) {
    try {
      call();
      ADD_FAILURE() << what << ": rank " << me_ << " of " << n_ << " was not refused";
    } catch (const aperture::Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(e.code(), aperture::ErrorCode::invalid_argument) << what << ": " << m;
      EXPECT_NE(m.find("on rank(s) " + odd + " `out` overlaps `in`"), std::string::npos) << what << ": " << m;
      EXPECT_NE(m.find("on rank(s) " + even + " it does not"), std::string::npos) << what << ": " << m;
      EXPECT_NE(m.find("Give every rank the same layout"), std::string::npos) << what << ": " << m;
    }
    // Every rank left the call at the same barrier: the next collective runs and is right.
    const std::uint64_t salt = next_salt();
    Buffer in = input(t, ReduceOp::sum, salt, kCount), out(t, kCount);
    zc.all_reduce(in.data(), out.data(), kCount, t, ReduceOp::sum);
    check(out, kCount, "all_reduce after the refused " + what, [&](std::uint64_t i) { return expected(t, ReduceOp::sum, salt, i); });
  };
  refused("all_reduce one-shot", [&] {
    zc.all_reduce(base, a.map, overlap ? base : elsewhere.data(), kCount, t, ReduceOp::sum, AllReduceAlgorithm::one_shot);
  });
  refused("all_reduce two-shot", [&] {  // in place is fine for two-shot; one element off is not
    zc.all_reduce(base, a.map, overlap ? base + 1 : elsewhere.data(), kCount, t, ReduceOp::sum, AllReduceAlgorithm::two_shot);
  });
  refused("reduce_scatter", [&] {
    zc.reduce_scatter(base, a.map, overlap ? base + me_ * kCount : elsewhere.data(), kCount, t, ReduceOp::max);
  });
  refused("all_to_all", [&] { zc.all_to_all(base, a.map, overlap ? base : elsewhere.data(), kCount, t); });
  refused("all_gather", [&] {  // in place on the odd ranks, from `a` to elsewhere on the even ones
    if (overlap) zc.all_gather(base + me_ * kCount, a.map, base, kCount, t);
    else zc.all_gather(base, a.map, elsewhere.data(), kCount, t);
  });
  provider_->free(a);
}

// A zero-copy call whose ranks pass their symmetric input at different offsets of its allocation
// (the odd ranks one element further in): each rank would read its peers at its own offset, so
// the wrong elements. Every rank fails instead, naming both groups (a broadcast's: those not at
// root's offset), before anything is written; the Communicator works on afterwards. Where every
// rank overlaps `in` and `out` the staged algorithm runs, which reads no peer's input: no error.
TEST_P(ElementTypesTest, ZeroCopyOffsetsThatDifferAreRefusedOnEveryRank) {
  if (n_ == 1) GTEST_SKIP() << "one rank cannot disagree with itself";
  constexpr std::uint64_t kCount = 1024;
  constexpr DataType t = DataType::float32;
  const std::uint64_t w = static_cast<std::uint64_t>(n_);
  aperture::Allocation a = provider_->allocate((kCount * w + 1) * 4 * 2);
  Communicator::Options options;
  options.all_to_all_direct_min_bytes = 0;
  options.broadcast_direct_min_bytes = 0;
  options.ll_max_bytes = 0;  // the zero-copy forms at this size, not the push paths
  options.broadcast_ll_max_bytes = 0;
  Communicator zc(*provider_, world(), options);
  const std::uint64_t shift = me_ % 2;  // elements
  auto* in = static_cast<float*>(a.ptr) + shift;
  const auto group = [&](int parity) {
    std::string list;
    for (int r = parity; r < n_; r += 2) list += (list.empty() ? "" : ", ") + std::to_string(r);
    return list;
  };
  const std::uint64_t sentinel = 0x7fc00bad;  // a float NaN's bits: no algorithm writes it
  const auto refused = [&](const std::string& what, int marked_parity, std::uint64_t out_count,
                           const std::function<void(float* out)>& call) {
    Buffer out(t, out_count);
    for (std::uint64_t i = 0; i < out_count; ++i) out.set(i, sentinel);
    try {
      call(static_cast<float*>(out.data()));
      ADD_FAILURE() << what << ": rank " << me_ << " of " << n_ << " was not refused";
    } catch (const aperture::Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(e.code(), aperture::ErrorCode::invalid_argument) << what << ": " << m;
      EXPECT_NE(m.find("on rank(s) " + group(marked_parity) + " it lies at another offset than on rank(s) " +
                       group(1 - marked_parity)),
                std::string::npos)
          << what << ": " << m;
      EXPECT_NE(m.find("every rank must pass the same offset"), std::string::npos) << what << ": " << m;
    }
    check(out, out_count, what + ": `out` untouched", [&](std::uint64_t) { return sentinel; });
    // Every rank left the call at the same barrier: the next collective runs and is right.
    const std::uint64_t salt = next_salt();
    Buffer x = input(t, ReduceOp::sum, salt, kCount), y(t, kCount);
    zc.all_reduce(x.data(), y.data(), kCount, t, ReduceOp::sum);
    check(y, kCount, "all_reduce after the refused " + what, [&](std::uint64_t i) { return expected(t, ReduceOp::sum, salt, i); });
  };
  refused("all_gather", 1, kCount * w, [&](float* out) { zc.all_gather(in, a.map, out, kCount, t); });
  refused("reduce_scatter", 1, kCount, [&](float* out) { zc.reduce_scatter(in, a.map, out, kCount, t, ReduceOp::sum); });
  refused("all_reduce one-shot", 1, kCount, [&](float* out) {
    zc.all_reduce(in, a.map, out, kCount, t, ReduceOp::sum, AllReduceAlgorithm::one_shot);
  });
  refused("all_reduce two-shot", 1, kCount, [&](float* out) {
    zc.all_reduce(in, a.map, out, kCount, t, ReduceOp::sum, AllReduceAlgorithm::two_shot);
  });
  refused("all_to_all", 1, kCount * w, [&](float* out) { zc.all_to_all(in, a.map, out, kCount, t); });
  refused("broadcast from root 0", 1, kCount, [&](float* out) { zc.broadcast(in, a.map, out, kCount, t, 0); });
  refused("broadcast from root 1", 0, kCount, [&](float* out) { zc.broadcast(in, a.map, out, kCount, t, 1); });
  // Every rank in place at its own offset: the staged all_reduce runs, and is right.
  {
    const std::uint64_t salt = next_salt();
    Buffer x = input(t, ReduceOp::sum, salt, kCount);
    std::memcpy(in, x.data(), kCount * 4);
    zc.all_reduce(in, a.map, in, kCount, t, ReduceOp::sum, AllReduceAlgorithm::one_shot);
    Buffer got(t, kCount);
    std::memcpy(got.data(), in, kCount * 4);
    check(got, kCount, "one-shot all_reduce in place at offsets that differ (staged)",
          [&](std::uint64_t i) { return expected(t, ReduceOp::sum, salt, i); });
  }
  world().barrier();
  provider_->free(a);
}

// Moving data is bitwise: every type, any bits (NaNs included), from every root.
TEST_P(ElementTypesTest, BroadcastAllGatherAllToAllEveryType) {
  const auto raw = [&](int rank, std::uint64_t salt, std::uint64_t i) {
    return test::draw(the_seed(), rank, salt, i);
  };
  for (DataType t : aperture::kAllDataTypes)
    for (std::uint64_t count : kCounts) {
      const std::string what = std::string(aperture::name_of(t)) + " count " + std::to_string(count);
      const auto make = [&](std::uint64_t salt, std::uint64_t n) {
        Buffer b(t, n);
        for (std::uint64_t i = 0; i < n; ++i) b.set(i, raw(me_, salt, i) & reference::mask(t));
        return b;
      };
      for (int root = 0; root < n_; ++root) {
        const std::uint64_t salt = next_salt();
        Buffer in = make(salt, count), out(t, count);
        comm_->broadcast(in.data(), out.data(), count, t, root);
        check(out, count, "broadcast root " + std::to_string(root) + " " + what,
              [&](std::uint64_t i) { return raw(root, salt, i) & reference::mask(t); });
      }
      {
        const std::uint64_t salt = next_salt();
        Buffer in = make(salt, count), out(t, count * n_);
        comm_->all_gather(in.data(), out.data(), count, t);
        check(out, count * n_, "all_gather " + what,
              [&](std::uint64_t i) { return raw(static_cast<int>(i / count), salt, i % count) & reference::mask(t); });
      }
      {
        const std::uint64_t salt = next_salt();
        Buffer in = make(salt, count * n_), out(t, count * n_);
        comm_->all_to_all(in.data(), out.data(), count, t);
        check(out, count * n_, "all_to_all " + what,
              [&](std::uint64_t i) { return raw(static_cast<int>(i / count), salt, me_ * count + i % count) & reference::mask(t); });
      }
    }
}

// The reference itself, on values whose results are known by hand (so a wrong reference cannot
// pass a wrong library).
TEST(ElementReference, KnownRoundings) {
  using reference::round_to;
  EXPECT_EQ(round_to(DataType::float16, 1.0), 0x3c00u);
  EXPECT_EQ(round_to(DataType::float16, 1.0 + 0x1.0p-11), 0x3c00u);  // a tie: to even
  EXPECT_EQ(round_to(DataType::float16, 1.0 + 3 * 0x1.0p-11), 0x3c02u);  // a tie: to even (up)
  EXPECT_EQ(round_to(DataType::float16, 65520.0), 0x7c00u);  // past the largest: infinity
  EXPECT_EQ(round_to(DataType::bfloat16, 1.0), 0x3f80u);
  EXPECT_EQ(round_to(DataType::bfloat16, -2.0), 0xc000u);
  EXPECT_EQ(round_to(DataType::float8_e4m3, 448.0), 0x7eu);
  EXPECT_EQ(round_to(DataType::float8_e4m3, 1000.0), 0x7eu);  // saturates
  EXPECT_EQ(round_to(DataType::float8_e4m3, 1.0), 0x38u);
  EXPECT_EQ(round_to(DataType::float8_e4m3, 0x1.0p-9), 0x01u);  // the least subnormal
  EXPECT_EQ(round_to(DataType::float8_e5m2, 1.0), 0x3cu);
  EXPECT_EQ(round_to(DataType::float8_e5m2, 1e6), 0x7bu);  // saturates at 57344
  // 1/3 in e4m3 is 0.34375 (1.375 x 2^-2): avg of three 1.0s is 3 x 0.34375 = 1.03125 -> 1.0.
  const std::uint64_t one = round_to(DataType::float8_e4m3, 1.0);
  EXPECT_EQ(reference::fold(DataType::float8_e4m3, ReduceOp::avg, {one, one, one}), round_to(DataType::float8_e4m3, 1.0));
  // int8 wraps: 100 + 100 = -56; avg of (100, 100, 100) = (300 - 256) / 3 = 14.
  EXPECT_EQ(reference::fold(DataType::int8, ReduceOp::sum, {100, 100}), 0xc8u);
  EXPECT_EQ(reference::fold(DataType::int8, ReduceOp::avg, {100, 100, 100}), 14u);
  EXPECT_EQ(reference::fold(DataType::int8, ReduceOp::min, {0xffu, 1}), 0xffu);  // -1 < 1
  EXPECT_EQ(reference::fold(DataType::uint8, ReduceOp::min, {0xffu, 1}), 1u);
  // -7 / 2 rounds towards zero: (-3 + -4) / 2 = -3.
  EXPECT_EQ(reference::fold(DataType::int32, ReduceOp::avg, {0xfffffffdu, 0xfffffffcu}), 0xfffffffdu);
}

// The new types and operations through the typed forms, and unknown enum values refused.
TEST_P(ElementTypesTest, TypedFormsAndUnknownValues) {
  std::vector<std::uint8_t> in(5), out(5);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(200 + me_ * 11 + i);
  comm_->all_reduce(in.data(), out.data(), in.size(), ReduceOp::max);
  for (std::size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], static_cast<std::uint8_t>(200 + (n_ - 1) * 11 + i));
  float x = 0;
  const std::string type = test::error_of(
      [&] { comm_->all_reduce(&x, &x, 1, static_cast<DataType>(99), ReduceOp::sum); });
  EXPECT_NE(type.find("DataType 99 is not one of"), std::string::npos) << type;
  const std::string op = test::error_of(
      [&] { comm_->all_reduce(&x, &x, 1, DataType::float32, static_cast<ReduceOp>(42)); });
  EXPECT_NE(op.find("ReduceOp 42 is not one of"), std::string::npos) << op;
  comm_->barrier();
}

// The tuning table has an entry for every rank count (tuning.h): the GPU one checked here as
// numbers (no GPU in CI; gpu-check runs GPU ranks sharing one), the host one by running it.
TEST(TuningTable, EveryRankCountHasAnEntry) {
  namespace tuning = aperture::collectives::tuning;
  for (int w = 1; w <= 8; ++w) {
    const std::size_t one_shot = tuning::one_shot_max_bytes(true, w), ll = tuning::ll_max_bytes(true, w);
    EXPECT_GE(one_shot, std::size_t{64} * 1024) << w << " GPUs";
    EXPECT_GE(ll, std::size_t{64} * 1024) << w << " GPUs";
    EXPECT_LE(ll, tuning::kDeviceLLMax) << w << " GPUs";
    EXPECT_EQ(ll & (ll - 1), 0u) << w << " GPUs: a power of two";
    if (w >= 4) {
      EXPECT_LE(one_shot, tuning::one_shot_max_bytes(true, w - 1)) << w << " GPUs: more ranks, one-shot reads more";
      EXPECT_LE(ll, tuning::ll_max_bytes(true, w - 1)) << w << " GPUs: more ranks, LL pushes more";
    }
    EXPECT_EQ(tuning::ll_max_bytes(false, w), 0u);
    for (bool shared : {false, true})
      EXPECT_EQ(tuning::broadcast_ll_max_bytes(true, w, shared), 0u) << w << " GPUs: the push broadcast is host-only";
    EXPECT_EQ(tuning::broadcast_ll_max_bytes(false, w, true), w == 1 ? 0u : tuning::kHostBroadcastLLMax)
        << w << " ranks sharing cores";
    EXPECT_EQ(tuning::broadcast_ll_max_bytes(false, w, false), 0u) << w << " ranks, a core each: staged";
  }
  // One piece carries the whole of a broadcast the table sends on the push path.
  EXPECT_GE(tuning::kHostBroadcastLLSlotBytes / 2, tuning::kHostBroadcastLLMax);
  EXPECT_GE(tuning::kHostBroadcastLLDepth, 2u);
  EXPECT_EQ(tuning::one_shot_max_bytes(true, 2), SIZE_MAX);  // measured: one-shot at every size
  EXPECT_EQ(tuning::ll_max_bytes(true, 2), std::size_t{512} * 1024);  // measured [ll]
}

// At this rank count (the suite runs at 1 to 8 ranks), the automatic choices at sizes around
// every threshold of the table run and give NCCL's result.
TEST_P(ElementTypesTest, EveryRankCountChoosesAValidPath) {
  namespace tuning = aperture::collectives::tuning;
  const std::size_t one_shot = tuning::one_shot_max_bytes(false, n_);
  EXPECT_EQ(comm_->one_shot_max_bytes(), one_shot);
  std::vector<std::size_t> sizes = {64, 4096, 256 * 1024, 1 << 20};
  if (one_shot != SIZE_MAX) sizes.insert(sizes.end(), {one_shot - 4, one_shot, one_shot + 4});
  for (Communicator* comm : {comm_.get(), ll_.get()})
    for (std::size_t bytes : sizes) {
      const std::uint64_t count = bytes / 4;
      const AllReduceAlgorithm chosen = comm->choose_all_reduce(bytes);
      const AllReduceAlgorithm expect = comm->uses_ll(bytes) ? AllReduceAlgorithm::ll
                                        : n_ == 1 || bytes <= comm->one_shot_max_bytes() ? AllReduceAlgorithm::one_shot
                                                                                         : AllReduceAlgorithm::two_shot;
      EXPECT_EQ(chosen, expect) << n_ << " ranks, " << bytes << " bytes";
      const std::string what = std::to_string(n_) + " ranks, " + std::to_string(bytes) + " B, " + aperture::name_of(chosen);
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
        const std::uint64_t salt = next_salt();
        Buffer in = input(DataType::float32, op, salt, count), out(DataType::float32, count);
        comm->all_reduce(in.data(), out.data(), count, DataType::float32, op);
        check(out, count, "all_reduce automatic " + what, [&](std::uint64_t i) { return expected(DataType::float32, op, salt, i); });
      }
      {
        const std::uint64_t salt = next_salt(), each = count / static_cast<std::uint64_t>(n_);
        Buffer in = input(DataType::bfloat16, ReduceOp::sum, salt, each * n_), out(DataType::bfloat16, each);
        comm->reduce_scatter(in.data(), out.data(), each, DataType::bfloat16, ReduceOp::sum);
        check(out, each, "reduce_scatter automatic " + what,
              [&](std::uint64_t i) { return expected(DataType::bfloat16, ReduceOp::sum, salt, me_ * each + i); });
      }
    }
  // broadcast on both sides of its push-path threshold, from every root.
  // (One rank has no push path: the staged one on both sides of where it would be.)
  // (The table's choice depends on whether this machine's ranks share cores: read what it chose.)
  const std::size_t push = *comm_->options().broadcast_ll_max_bytes;
  const std::size_t edge = push != 0 ? push : tuning::kHostBroadcastLLMax;
  EXPECT_EQ(comm_->broadcast_uses_ll(edge), push != 0);
  EXPECT_FALSE(comm_->broadcast_uses_ll(edge + 4));
  for (std::size_t bytes : {std::size_t{4}, edge - 4, edge, edge + 4, std::size_t{64} * 1024})
    for (int root = 0; root < n_; ++root) {
      const std::uint64_t salt = next_salt(), count = bytes / 4;
      Buffer in = input(DataType::float32, ReduceOp::sum, salt, count), out(DataType::float32, count);
      comm_->broadcast(in.data(), out.data(), count, DataType::float32, root);
      check(out, count, std::to_string(n_) + " ranks, broadcast " + std::to_string(bytes) + " B root " + std::to_string(root) +
                            (comm_->broadcast_uses_ll(bytes) ? " (push)" : " (staged)"),
            [&, root](std::uint64_t i) { return bits_of(DataType::float32, ReduceOp::sum, root, salt, i); });
    }
}

INSTANTIATE_TEST_SUITE_P(Shm, ElementTypesTest, ::testing::Values("shm"), test::provider_test_name);

}  // namespace
