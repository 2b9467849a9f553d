// The GPU proxy's queue (aperture/proxy_queue.h) and proxy thread (aperture/gpu_proxy.h), driven
// by host threads as producers: the producer code is the __host__ __device__ code a kernel runs.
// The engine is a fake one in this process (three "peers", each a byte array), called only from
// the proxy thread, so what it sees is exactly what the proxy hands it, in the proxy's order.
#include <gtest/gtest.h>

#include <aperture/aperture.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using aperture::EngineOp;
using aperture::EngineRequest;
using aperture::GpuProxy;
using aperture::ProxyStatus;

constexpr int kPeers = 3;
constexpr int kProducers = 8;
constexpr std::size_t kData = 300;  // int64 per region: 2400 bytes, three payloads (1024, 1024, 352)
constexpr std::size_t kRegionBytes = kData * sizeof(std::int64_t);
// Each peer's memory: one data region per producer, then one flag, one compare-swap word per
// producer, then a counter every producer adds to.
constexpr std::size_t kFlags = kProducers * kRegionBytes;
constexpr std::size_t kWords = kFlags + kProducers * 8;
constexpr std::size_t kCounter = kWords + kProducers * 8;
constexpr std::size_t kPeerBytes = kCounter + 8;

std::int64_t value(int producer, int round, std::size_t i) {
  return (producer + 1) * 1000003LL + round * 7919LL + static_cast<std::int64_t>(i) * 17 + 5;
}

struct FakeEngine {
  std::vector<std::vector<unsigned char>> memory = std::vector<std::vector<unsigned char>>(
      kPeers, std::vector<unsigned char>(kPeerBytes, 0));
  std::atomic<int> failing_peer{-1};
  std::atomic<bool> gate_closed{false};  // while true, every call waits (a slow or stuck engine)
  std::atomic<bool> in_call{false};
  // A signal of round r from producer k into a peer must find producer k's round-r data there.
  int signals_seen = 0;
  int signals_before_their_data = 0;
  std::vector<std::pair<int, int>> order;  // (producer, round) of every signal, as carried out

  template <class T>
  T& at(int peer, std::uint64_t offset) {
    return *reinterpret_cast<T*>(memory.at(static_cast<std::size_t>(peer)).data() + offset);
  }

  static void call(void* context, const EngineRequest& r, void* result) {
    auto& e = *static_cast<FakeEngine*>(context);
    e.in_call = true;
    while (e.gate_closed.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    e.in_call = false;
    if (r.peer == e.failing_peer.load())
      throw aperture::Error(aperture::ErrorCode::system, "fake engine: peer " + std::to_string(r.peer) + " is down");
    if (r.peer < 0 || r.peer >= kPeers || r.offset + std::max<std::uint64_t>(r.bytes, 8) > kPeerBytes)
      throw aperture::Error(aperture::ErrorCode::invalid_argument, "fake engine: request out of range");
    unsigned char* target = e.memory[static_cast<std::size_t>(r.peer)].data() + r.offset;
    switch (r.op) {
      case EngineOp::put: std::memcpy(target, r.local, r.bytes); break;
      case EngineOp::get: std::memcpy(const_cast<void*>(r.local), target, r.bytes); break;
      case EngineOp::fetch_op: {
        if (r.atomic != aperture::EngineAtomic::add || r.element_bytes != 8)
          throw aperture::Error(aperture::ErrorCode::internal, "fake engine: only 8-byte add");
        auto& word = e.at<std::uint64_t>(r.peer, r.offset);
        std::memcpy(result, &word, 8);
        word += r.value;
        break;
      }
      case EngineOp::compare_swap: {
        auto& word = e.at<std::uint64_t>(r.peer, r.offset);
        std::memcpy(result, &word, 8);
        if (word == r.compare) word = r.value;
        break;
      }
      case EngineOp::signal: {
        e.at<std::uint64_t>(r.peer, r.offset) = r.value;
        const int producer = static_cast<int>((r.offset - kFlags) / 8);
        const int round = static_cast<int>(r.value);
        ++e.signals_seen;
        e.order.emplace_back(producer, round);
        for (std::size_t i = 0; i < kData; ++i)
          if (e.at<std::int64_t>(r.peer, producer * kRegionBytes + i * 8) != value(producer, round, i)) {
            ++e.signals_before_their_data;
            break;
          }
        break;
      }
    }
  }
};

std::unique_ptr<GpuProxy> make_proxy(FakeEngine& engine, std::uint32_t capacity, double timeout_s = 30) {
  aperture::EngineChannel channel;
  channel.context = &engine;
  channel.host_call = &FakeEngine::call;
  return std::make_unique<GpuProxy>(channel, nullptr,
                                    GpuProxy::Options{capacity, GpuProxy::QueueMemory::host, timeout_s});
}

ProxyStatus atomic_request(const aperture::ProxyQueue& q, EngineOp op, int peer, std::uint64_t offset,
                           std::uint64_t value, std::uint64_t compare, std::uint64_t* old) {
  EngineRequest r;
  r.op = op;
  r.atomic = aperture::EngineAtomic::add;
  r.element_bytes = 8;
  r.peer = peer;
  r.offset = offset;
  r.value = value;
  r.compare = compare;
  return aperture::detail::proxy_call(q, r, nullptr, nullptr, old);
}

ProxyStatus signal_request(const aperture::ProxyQueue& q, int peer, std::uint64_t offset, std::uint64_t value) {
  EngineRequest r;
  r.op = EngineOp::signal;
  r.element_bytes = 8;
  r.peer = peer;
  r.offset = offset;
  r.value = value;
  return aperture::detail::proxy_call(q, r, nullptr, nullptr, nullptr);
}

// Eight producers on a four-slot queue (so most requests wait for a slot), 200 rounds each: put
// three payloads, get them back, add to a shared counter, compare-swap a word of their own, then
// signal. Every element is checked; the engine checks that no signal overtook its data.
TEST(ProxyQueue, ManyProducersEveryOperationInOrder) {
  FakeEngine engine;
  auto proxy = make_proxy(engine, 4);
  const aperture::ProxyQueue& q = proxy->queue();
  constexpr int kRounds = 200;
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> adds(kProducers);  // (old, added)
  std::vector<int> bad(kProducers, 0);
  std::vector<std::thread> producers;
  for (int k = 0; k < kProducers; ++k)
    producers.emplace_back([&, k] {
      std::vector<std::int64_t> mine(kData), got(kData);
      for (int round = 1; round <= kRounds; ++round) {
        const int peer = (k + round) % kPeers;
        for (std::size_t i = 0; i < kData; ++i) mine[i] = value(k, round, i);
        if (aperture::detail::proxy_transfer(q, EngineOp::put, peer, k * kRegionBytes, mine.data(), kRegionBytes) !=
            ProxyStatus::ok)
          ++bad[k];
        std::fill(got.begin(), got.end(), -1);
        if (aperture::detail::proxy_transfer(q, EngineOp::get, peer, k * kRegionBytes, got.data(), kRegionBytes) !=
            ProxyStatus::ok)
          ++bad[k];
        for (std::size_t i = 0; i < kData; ++i)
          if (got[i] != value(k, round, i)) ++bad[k];
        const std::uint64_t add = static_cast<std::uint64_t>(k * 1000 + round);
        std::uint64_t old = ~0ull;
        if (atomic_request(q, EngineOp::fetch_op, 0, kCounter, add, 0, &old) != ProxyStatus::ok) ++bad[k];
        adds[k].emplace_back(old, add);
        // compare-swap: the word holds this producer's previous round (0 at first) on the peer
        // it last wrote; a swap with the wrong expectation must fail and return the real value.
        const std::uint64_t word = kWords + k * 8;
        std::uint64_t seen = ~0ull;
        if (atomic_request(q, EngineOp::compare_swap, peer, word, round, 999999, &seen) != ProxyStatus::ok) ++bad[k];
        const std::uint64_t before = round > kPeers ? static_cast<std::uint64_t>(round - kPeers) : 0;
        if (seen != before) ++bad[k];
        if (atomic_request(q, EngineOp::compare_swap, peer, word, round, before, &seen) != ProxyStatus::ok ||
            seen != before)
          ++bad[k];
        if (signal_request(q, peer, kFlags + k * 8, static_cast<std::uint64_t>(round)) != ProxyStatus::ok) ++bad[k];
      }
    });
  for (auto& t : producers) t.join();
  proxy->stop();
  for (int k = 0; k < kProducers; ++k) EXPECT_EQ(bad[k], 0) << "producer " << k;
  EXPECT_EQ(engine.signals_seen, kProducers * kRounds);
  EXPECT_EQ(engine.signals_before_their_data, 0);
  // Each producer's own signals were carried out in its order.
  std::vector<int> last(kProducers, 0);
  for (auto [k, round] : engine.order) {
    EXPECT_EQ(round, last[k] + 1) << "producer " << k;
    last[k] = round;
  }
  // The old values of every add, sorted, chain: each is the one before plus what was added then.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> all;
  for (auto& a : adds) all.insert(all.end(), a.begin(), a.end());
  std::sort(all.begin(), all.end());
  std::uint64_t expect = 0;
  for (auto [old, add] : all) {
    EXPECT_EQ(old, expect);
    expect = old + add;
  }
  EXPECT_EQ(engine.at<std::uint64_t>(0, kCounter), expect);
  // 8 producers x 200 rounds x (3 puts + 3 gets + 1 add + 2 compare-swaps + 1 signal)
  EXPECT_EQ(proxy->completed(), std::uint64_t{kProducers} * kRounds * 10);
  EXPECT_EQ(proxy->failures(), 0u);
}

// A long transfer keeps a window of requests published ahead of the proxy: with the engine held
// on the first piece, kProxyWindow pieces are published (one at a time before the window), and
// every byte arrives once it answers.
TEST(ProxyQueue, LongTransferKeepsAWindowPublished) {
  FakeEngine engine;
  engine.gate_closed = true;
  auto proxy = make_proxy(engine, 64);
  constexpr std::size_t kPieces = 16;
  constexpr std::size_t kBytes = kPieces * aperture::kProxyPayloadBytes - 24;  // the last piece short
  static_assert(kBytes <= kFlags, "inside the peer's data regions");
  std::vector<unsigned char> data(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) data[i] = static_cast<unsigned char>((i * 131 + 7) % 251);
  ProxyStatus status = ProxyStatus::closed;
  std::thread producer(
      [&] { status = aperture::detail::proxy_transfer(proxy->queue(), EngineOp::put, 2, 0, data.data(), kBytes); });
  while (!engine.in_call) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::size_t published = 0;
  for (std::uint64_t t = 0; t < 64; ++t)
    if (aperture::detail::load_acquire(&proxy->queue().slots[t].sequence) == t + 1) ++published;
  EXPECT_EQ(published, aperture::kProxyWindow);
  engine.gate_closed = false;
  producer.join();
  EXPECT_EQ(status, ProxyStatus::ok);
  EXPECT_EQ(proxy->completed(), kPieces);
  for (std::size_t i = 0; i < kBytes; ++i) ASSERT_EQ(engine.memory[2][i], data[i]) << "byte " << i;
}

// Windows on a two-slot queue (each clipped to the queue's two slots), eight producers putting
// and getting back three payloads each: no producer waits for its own slot, none hangs.
TEST(ProxyQueue, WindowsOnATinyQueueNeverDeadlock) {
  FakeEngine engine;
  auto proxy = make_proxy(engine, 2, 20);
  constexpr std::size_t kBytes = kRegionBytes;  // three payloads: two windows of at most two
  constexpr std::size_t kSlice = kRegionBytes;
  std::vector<int> bad(kProducers, 0);
  std::vector<std::thread> producers;
  for (int k = 0; k < kProducers; ++k)
    producers.emplace_back([&, k] {
      std::vector<unsigned char> mine(kBytes), got(kBytes);
      for (int round = 1; round <= 30; ++round) {
        for (std::size_t i = 0; i < kBytes; ++i) mine[i] = static_cast<unsigned char>((k * 37 + round * 11 + i) % 253);
        const int peer = (k + round) % kPeers;
        if (aperture::detail::proxy_transfer(proxy->queue(), EngineOp::put, peer, k * kSlice, mine.data(), kBytes) !=
            ProxyStatus::ok)
          ++bad[k];
        std::fill(got.begin(), got.end(), 0xEE);
        if (aperture::detail::proxy_transfer(proxy->queue(), EngineOp::get, peer, k * kSlice, got.data(), kBytes) !=
            ProxyStatus::ok)
          ++bad[k];
        if (got != mine) ++bad[k];
      }
    });
  for (auto& t : producers) t.join();
  for (int k = 0; k < kProducers; ++k) EXPECT_EQ(bad[k], 0) << "producer " << k;
  EXPECT_EQ(proxy->completed(), std::uint64_t{kProducers} * 30 * 2 * 3);
}

// A full queue makes producers wait (not fail) while the engine is slow, and they all complete
// once it answers.
TEST(ProxyQueue, FullQueueMakesProducersWait) {
  FakeEngine engine;
  engine.gate_closed = true;
  auto proxy = make_proxy(engine, 2);
  std::atomic<int> finished{0};
  std::vector<ProxyStatus> status(6, ProxyStatus::closed);
  std::vector<std::thread> producers;
  for (int k = 0; k < 6; ++k)
    producers.emplace_back([&, k] {
      status[k] = signal_request(proxy->queue(), 1, kFlags + k * 8, 100 + k);
      ++finished;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(finished.load(), 0) << "producers returned while the engine had not answered";
  EXPECT_EQ(proxy->completed(), 0u);
  engine.gate_closed = false;
  for (auto& t : producers) t.join();
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(status[k], ProxyStatus::ok) << k;
    EXPECT_EQ(engine.at<std::uint64_t>(1, kFlags + k * 8), 100u + k);
  }
  EXPECT_EQ(proxy->completed(), 6u);
}

// A stuck engine: the producers' waits are bounded. The one in the engine and the one queued
// behind it time out waiting for completion, a third waiting for a slot times out as well.
TEST(ProxyQueue, StuckEngineTimesOutNotHangs) {
  FakeEngine engine;
  engine.gate_closed = true;
  auto proxy = make_proxy(engine, 2, 0.3);
  std::vector<ProxyStatus> status(2, ProxyStatus::ok);
  std::thread a([&] { status[0] = signal_request(proxy->queue(), 0, kFlags, 1); });
  while (!engine.in_call) std::this_thread::yield();
  std::thread b([&] { status[1] = signal_request(proxy->queue(), 0, kFlags + 8, 2); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // b has published ticket 1
  const auto start = std::chrono::steady_clock::now();
  const ProxyStatus third = signal_request(proxy->queue(), 0, kFlags + 16, 3);  // ticket 2: slot 0 is busy
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  a.join();
  b.join();
  EXPECT_EQ(status[0], ProxyStatus::completion_timeout);
  EXPECT_EQ(status[1], ProxyStatus::completion_timeout);
  EXPECT_EQ(third, ProxyStatus::queue_full_timeout);
  EXPECT_GE(waited, 0.29);
  EXPECT_LT(waited, 10.0);
  engine.gate_closed = false;
  proxy->stop();  // the proxy waits for ticket 2, which its producer abandoned: stop() still returns
}

// The engine throws for one peer: those requests end engine_failed with the message kept; the
// others, before and after, complete.
TEST(ProxyQueue, EngineFailureReachesTheProducer) {
  FakeEngine engine;
  engine.failing_peer = 2;
  auto proxy = make_proxy(engine, 8);
  const aperture::ProxyQueue& q = proxy->queue();
  int failed = 0;
  for (int i = 0; i < 30; ++i) {
    const int peer = i % kPeers;
    std::uint64_t old = 12345;
    const ProxyStatus s = atomic_request(q, EngineOp::fetch_op, peer, kCounter, i + 1, 0, &old);
    if (peer == 2) {
      EXPECT_EQ(s, ProxyStatus::engine_failed) << i;
      ++failed;
    } else {
      EXPECT_EQ(s, ProxyStatus::ok) << i;
    }
    std::int64_t data[3] = {value(peer, i, 0), value(peer, i, 1), value(peer, i, 2)};
    EXPECT_EQ(aperture::detail::proxy_transfer(q, EngineOp::put, peer, 0, data, sizeof data),
              peer == 2 ? ProxyStatus::engine_failed : ProxyStatus::ok);
    if (peer != 2)
      for (int e = 0; e < 3; ++e) EXPECT_EQ(engine.at<std::int64_t>(peer, e * 8), data[e]);
  }
  // Sums of i + 1 over the i that went to peers 0 and 1.
  std::uint64_t sum[2] = {0, 0};
  for (int i = 0; i < 30; ++i)
    if (i % kPeers < 2) sum[i % kPeers] += i + 1;
  EXPECT_EQ(engine.at<std::uint64_t>(0, kCounter), sum[0]);
  EXPECT_EQ(engine.at<std::uint64_t>(1, kCounter), sum[1]);
  EXPECT_EQ(proxy->failures(), static_cast<std::uint64_t>(2 * failed));
  EXPECT_NE(proxy->last_error().find("peer 2 is down"), std::string::npos) << proxy->last_error();
  // A transfer longer than a payload is refused before it takes a ticket.
  EngineRequest big;
  big.op = EngineOp::put;
  big.bytes = aperture::kProxyPayloadBytes + 1;
  std::vector<unsigned char> bytes(big.bytes);
  EXPECT_EQ(aperture::detail::proxy_call(q, big, bytes.data(), nullptr, nullptr), ProxyStatus::bad_request);
  std::uint64_t old = 0;
  EXPECT_EQ(atomic_request(q, EngineOp::fetch_op, 0, kCounter, 1, 0, &old), ProxyStatus::ok);
  EXPECT_EQ(old, sum[0]);
}

// stop() with a request in the engine and one queued: the first completes, the queued one and
// any later one end `closed` at once, not after the timeout.
TEST(ProxyQueue, StopReleasesWaitingProducers) {
  FakeEngine engine;
  engine.gate_closed = true;
  auto proxy = make_proxy(engine, 4, 30);
  ProxyStatus first = ProxyStatus::closed, queued = ProxyStatus::ok;
  std::thread a([&] { first = signal_request(proxy->queue(), 1, kFlags, 7); });
  while (!engine.in_call) std::this_thread::yield();
  std::thread b([&] { queued = signal_request(proxy->queue(), 1, kFlags + 8, 8); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = std::chrono::steady_clock::now();
  std::thread stopper([&] { proxy->stop(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  engine.gate_closed = false;  // the call in the engine returns; the proxy then sees the stop
  stopper.join();
  a.join();
  b.join();
  const ProxyStatus later = signal_request(proxy->queue(), 1, kFlags + 16, 9);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(first, ProxyStatus::ok);
  EXPECT_EQ(queued, ProxyStatus::closed);
  EXPECT_EQ(later, ProxyStatus::closed);
  EXPECT_LT(took, 5.0);
  EXPECT_EQ(engine.at<std::uint64_t>(1, kFlags), 7u);
  EXPECT_EQ(engine.at<std::uint64_t>(1, kFlags + 8), 0u);  // never carried out
  proxy.reset();  // destroying a stopped proxy is fine
}

TEST(ProxyQueue, RefusesBadSetup) {
  FakeEngine engine;
  aperture::EngineChannel none;
  try {
    GpuProxy proxy(none, nullptr, GpuProxy::Options{8, GpuProxy::QueueMemory::host, 1});
    FAIL() << "a channel without an engine was accepted";
  } catch (const aperture::Error& e) {
    EXPECT_EQ(e.code(), aperture::ErrorCode::invalid_argument);
  }
  try {
    make_proxy(engine, 1);
    FAIL() << "a one-slot queue was accepted";
  } catch (const aperture::Error& e) {
    EXPECT_NE(std::string(e.what()).find("capacity 1"), std::string::npos) << e.what();
  }
  auto proxy = make_proxy(engine, 4);
  aperture::PeerView other;
  other.engine.host_call = &FakeEngine::call;
  other.engine.context = nullptr;  // another engine's state
  EXPECT_THROW(proxy->peer_view(other), aperture::Error);
  other.engine.context = &engine;
  EXPECT_TRUE(proxy->peer_view(other).engine.queue.attached());
}

}  // namespace
