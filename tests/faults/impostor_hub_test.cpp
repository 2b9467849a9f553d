// A rank talking to something that is not its job's hub.
//   - A listener that does not know the job token: the rank refuses it at the handshake (the hub
//     proves itself first) and sends it nothing after its hello, which carries no token.
//   - A listener that knows the token (a hub of this job gone wrong, or one that got the token)
//     and then answers the first call wrongly: the rank must throw an aperture::Error naming the
//     malformed answer, must not allocate what the answer announces, and every later call must
//     repeat the error instead of reading on from a stream it no longer understands; a hub that
//     stops in the middle of an answer is given up on after the call's bound, not waited for.
// Also the real hub's limits: an allgather too large for one answer is refused on the rank
// before it is sent, and the hub thread survives running out of memory (its exception boundary).
#include <gtest/gtest.h>

#include <aperture/aperture.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "../common/error_of.h"
#include "bootstrap/hub.h"
#include "bootstrap/hub_client.h"
#include "bootstrap/job_proof.h"
#include "bootstrap/socket.h"
#include "bootstrap/wire.h"

namespace {

namespace wire = aperture::detail::wire;
using aperture::detail::Prover;
using aperture::detail::read_all;
using aperture::detail::write_all;
using Clock = std::chrono::steady_clock;

constexpr const char* kToken = "token-of-this-job";

// How the impostor answers.
enum class Answer { wrong_token, too_large, another_call, not_a_hub, huge_notice, stops_mid_answer };

// Accepts one rank and goes through the handshake: with the job's token, except for wrong_token,
// where it proves a guessed one. Then takes the first request (with payload), answers it as told,
// and keeps the connection open until the rank is done. Counts what the rank sent after its hello.
class ImpostorHub {
 public:
  explicit ImpostorHub(Answer answer) : listener_(aperture::detail::listen_unix()) {
    thread_ = std::thread([this, answer] { serve(answer); });
  }
  ~ImpostorHub() { finish(); }
  const std::string& address() const { return listener_.address; }
  // Waits until the impostor is done with its connection (the rank closed it); then returns the
  // bytes the rank sent after its hello.
  std::size_t finish() {
    if (thread_.joinable()) thread_.join();
    return bytes_after_hello_;
  }

 private:
  void serve(Answer answer) {
    const aperture::detail::Fd fd(::accept(listener_.fd.get(), nullptr, nullptr));
    if (!fd) return;
    wire::Hello hello;
    if (!read_all(fd.get(), &hello, sizeof hello)) return;
    wire::HubHello hub_hello;
    hub_hello.challenge = aperture::detail::make_challenge();
    const std::string token = answer == Answer::wrong_token ? "a-guessed-token" : kToken;
    hub_hello.proof =
        job_proof(Prover::hub, token, hello.challenge, hub_hello.challenge, hello.rank, hello.world_size);
    if (!write_all(fd.get(), &hub_hello, sizeof hub_hello)) return;
    if (answer == Answer::wrong_token) {
      char byte = 0;
      while (::recv(fd.get(), &byte, 1, 0) == 1) ++bytes_after_hello_;  // until the rank closes
      return;
    }
    wire::RankProof proof;
    if (!read_all(fd.get(), &proof, sizeof proof)) return;
    const wire::HelloReply accepted;
    if (!write_all(fd.get(), &accepted, sizeof accepted)) return;
    wire::Request request;
    if (!read_all(fd.get(), &request, sizeof request)) return;
    std::vector<char> payload(request.payload_bytes);
    if (!payload.empty() && !read_all(fd.get(), payload.data(), payload.size())) return;
    wire::Reply reply;
    reply.seq = request.seq;
    reply.payload_bytes = request.bytes * 2;  // an allgather of 2 ranks' worth: right for 2
    std::size_t header_bytes = sizeof reply;
    switch (answer) {
      case Answer::wrong_token: break;
      case Answer::too_large: reply.payload_bytes = std::uint64_t{1} << 40; break;  // 1 TiB "result"
      case Answer::another_call: reply.seq = request.seq + 7; break;
      case Answer::not_a_hub: reply.magic = 0x48545450; break;  // "HTTP"
      case Answer::huge_notice:  // "the job failed", unasked, with a 1 TiB reason
        reply.seq = 0;
        reply.status = 1;
        reply.payload_bytes = std::uint64_t{1} << 40;
        break;
      case Answer::stops_mid_answer: header_bytes = sizeof reply / 2; break;  // then silence
    }
    if (!write_all(fd.get(), &reply, header_bytes)) return;
    char byte = 0;
    (void)read_all(fd.get(), &byte, 1);  // until the rank closes (its goodbye, or its end)
  }

  aperture::detail::Listener listener_;
  std::thread thread_;
  std::size_t bytes_after_hello_ = 0;
};

// What the first Team call through the impostor threw (and the second's message, if asked). Every
// refusal here is a mismatch: the peer is not this job's hub.
test::Refusal first_call_refusal(Answer answer, std::string* second = nullptr,
                                 std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  ImpostorHub hub(answer);
  aperture::detail::HubClient client(hub.address(), 0, 2, kToken, timeout);
  const std::uint64_t mine = 42;
  std::uint64_t all[2] = {};
  const test::Refusal first = test::refusal_of([&] { client.allgather(&mine, all, sizeof mine); });
  if (second != nullptr) *second = test::error_of([&] { client.barrier(); });
  return first;
}

TEST(ImpostorHub, AHubThatDoesNotKnowTheTokenIsRefusedAndLearnsNothing) {
  ImpostorHub hub(Answer::wrong_token);
  const test::Refusal refusal = test::refusal_of(
      [&] { aperture::detail::HubClient client(hub.address(), 0, 2, kToken, std::chrono::milliseconds(5000)); });
  const std::string& message = refusal.message;
  EXPECT_EQ(refusal.code, aperture::ErrorCode::mismatch) << message;
  EXPECT_TRUE(test::contains(message, "does not know this job's token")) << message;
  EXPECT_TRUE(test::contains(message, "refusing to join it")) << message;
  // The rank proved nothing to it (no RankProof, no request): what it sent is its hello only,
  // which carries a random challenge, not the token.
  EXPECT_EQ(hub.finish(), 0u) << "the rank sent an impostor hub data after its hello";
}

// The control of the test above: the same impostor with the job's token is accepted (and then
// caught by its wrong answer), so the refusal above is the token's doing.
TEST(ImpostorHub, AHubThatKnowsTheTokenIsAccepted) {
  const test::Refusal refusal = first_call_refusal(Answer::another_call);
  EXPECT_FALSE(test::contains(refusal.message, "token")) << refusal.message;
  EXPECT_TRUE(test::contains(refusal.message, "got a malformed answer")) << refusal.message;
}

TEST(ImpostorHub, AnAnswerOfTheWrongSizeIsRefusedNotAllocated) {
  const test::Refusal refusal = first_call_refusal(Answer::too_large);
  const std::string& message = refusal.message;
  EXPECT_EQ(refusal.code, aperture::ErrorCode::mismatch) << message;
  EXPECT_TRUE(test::contains(message, "got a malformed answer from the rendezvous hub")) << message;
  EXPECT_TRUE(test::contains(message, "this job's hub?")) << message;
}

TEST(ImpostorHub, AnAnswerToAnotherCallIsRefused) {
  const test::Refusal refusal = first_call_refusal(Answer::another_call);
  const std::string& message = refusal.message;
  EXPECT_EQ(refusal.code, aperture::ErrorCode::mismatch) << message;
  EXPECT_TRUE(test::contains(message, "got a malformed answer")) << message;
  EXPECT_TRUE(test::contains(message, "call #8")) << message;
}

TEST(ImpostorHub, SomethingThatIsNotAHubIsRefusedAndEveryLaterCallSaysSo) {
  std::string second;
  const test::Refusal refusal = first_call_refusal(Answer::not_a_hub, &second);
  const std::string& message = refusal.message;
  EXPECT_EQ(refusal.code, aperture::ErrorCode::mismatch) << message;
  EXPECT_TRUE(test::contains(message, "magic 0x48545450")) << message;
  EXPECT_TRUE(test::contains(second, "got a malformed answer")) << second;
}

TEST(ImpostorHub, AFailureNoticeWithAnAbsurdReasonIsRefusedNotAllocated) {
  const test::Refusal refusal = first_call_refusal(Answer::huge_notice);
  const std::string& message = refusal.message;
  EXPECT_EQ(refusal.code, aperture::ErrorCode::mismatch) << message;
  EXPECT_TRUE(test::contains(message, "sent something that is not an answer")) << message;
  EXPECT_TRUE(test::contains(message, "1099511627776 bytes")) << message;
}

// Half a reply header, then silence: the read after the first byte is bounded too (timeout 1 s
// plus the 5 s margin), where it once waited forever.
TEST(ImpostorHub, AHubThatStopsMidAnswerIsGivenUpOnWithinTheBound) {
  const auto start = Clock::now();
  std::string second;
  const test::Refusal refusal = first_call_refusal(Answer::stops_mid_answer, &second, std::chrono::milliseconds(1000));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const std::string& message = refusal.message;
  EXPECT_EQ(refusal.code, aperture::ErrorCode::timeout) << message;
  EXPECT_TRUE(test::contains(message, "began its answer but did not finish it within 6 s")) << message;
  EXPECT_TRUE(test::contains(second, "did not finish it")) << second;
  EXPECT_GE(seconds, 5.5) << message;
  EXPECT_LT(seconds, 20.0) << message;
}

// --- the real hub ---------------------------------------------------------------------------

aperture::detail::HubOptions hub_options(int world_size) {
  aperture::detail::HubOptions options;
  options.world_size = world_size;
  options.token = kToken;
  options.timeout = std::chrono::seconds(20);
  return options;
}

// An allgather whose answer (bytes x ranks) is over the limit is refused on the rank before it
// sends a byte, with the numbers and the way out; the team stays usable for calls that fit.
TEST(RealHub, AnAllgatherTooLargeForOneAnswerIsRefusedOnTheRank) {
  constexpr int kRanks = 3;
  aperture::detail::Hub hub(hub_options(kRanks));
  const std::uint64_t per_rank = (wire::kMaxAnswer / kRanks) + 1;  // under the per-rank cap, over the answer's
  ASSERT_LE(per_rank, wire::kMaxPayload);
  std::vector<test::Refusal> refusals(kRanks);
  std::vector<std::vector<std::uint64_t>> gathered(kRanks, std::vector<std::uint64_t>(kRanks));
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r)
    ranks.emplace_back([&, r] {
      aperture::detail::HubClient client(hub.address(), r, kRanks, kToken, std::chrono::seconds(20));
      // Never read: the refusal comes before the payload is touched.
      refusals[r] = test::refusal_of([&] { client.allgather(nullptr, nullptr, per_rank); });
      const std::uint64_t mine = 1000 + r;
      client.allgather(&mine, gathered[r].data(), sizeof mine);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(refusals[r].code, aperture::ErrorCode::invalid_argument) << refusals[r].message;
    EXPECT_TRUE(test::contains(refusals[r].message, std::to_string(per_rank) + " bytes per rank x 3 ranks"))
        << refusals[r].message;
    EXPECT_TRUE(test::contains(refusals[r].message, "exceeds the rendezvous limit of 4294967296 bytes per answer"))
        << refusals[r].message;
    for (int from = 0; from < kRanks; ++from) EXPECT_EQ(gathered[r][from], 1000u + from) << r << " from " << from;
  }
  EXPECT_EQ(hub.failure(), "");
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define APERTURE_TEST_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define APERTURE_TEST_UNDER_SANITIZER 1
#endif
#endif

// A large legal allgather (each rank's part under the limits) that the hub cannot hold: the hub
// runs in a child process whose address space is capped (RLIMIT_AS) below what the round needs,
// so its allocation throws bad_alloc on the hub thread. Every rank must get an aperture::Error
// (out_of_memory) saying the hub ran out of memory, and the hub process must not die of
// std::terminate. The ranks run here, with no cap.
TEST(RealHub, AHubThatRunsOutOfMemoryFailsTheJobOnEveryRankInsteadOfDying) {
#ifdef APERTURE_TEST_UNDER_SANITIZER
  GTEST_SKIP() << "a sanitizer reserves terabytes of shadow memory: an address-space cap cannot be set under it";
#else
  constexpr int kRanks = 2;
  // 64 MiB each. The hub holds each rank's part twice as it arrives (its input buffer keeps the
  // capacity it grew to, up to 128 MiB, beside the 64 MiB part): at most ~384 MiB for both. The
  // answer needs 128 MiB more on top. The cap leaves 448 MiB: 64 MiB of room on either side.
  constexpr std::uint64_t kPerRank = std::uint64_t{64} << 20;
  int address_pipe[2];
  ASSERT_EQ(::pipe(address_pipe), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(address_pipe[0]);
    try {
      aperture::detail::Hub hub(hub_options(kRanks));
      // Measured once the hub thread runs (its stack and malloc arena are mapped).
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::FILE* statm = std::fopen("/proc/self/statm", "r");
      unsigned long pages = 0;
      if (statm == nullptr || std::fscanf(statm, "%lu", &pages) != 1) ::_exit(3);
      std::fclose(statm);
      rlimit cap{};
      ::getrlimit(RLIMIT_AS, &cap);
      cap.rlim_cur = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + (rlim_t{448} << 20);
      if (::setrlimit(RLIMIT_AS, &cap) != 0) ::_exit(4);
      const std::string address = hub.address() + "\n";
      if (::write(address_pipe[1], address.data(), address.size()) != static_cast<ssize_t>(address.size())) ::_exit(5);
      hub.wait_all_left(std::chrono::seconds(60));
      ::_exit(hub.failure().find("ran out of memory") != std::string::npos ? 0 : 6);
    } catch (...) {
      ::_exit(7);
    }
  }
  ::close(address_pipe[1]);
  std::string address;
  char c = 0;
  while (::read(address_pipe[0], &c, 1) == 1 && c != '\n') address += c;
  ::close(address_pipe[0]);
  ASSERT_FALSE(address.empty()) << "the hub child did not start";

  std::vector<test::Refusal> refusals(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r)
    ranks.emplace_back([&, r] {
      aperture::detail::HubClient client(address, r, kRanks, kToken, std::chrono::seconds(20));
      std::vector<char> mine(kPerRank, static_cast<char>('a' + r));
      refusals[r] = test::refusal_of([&] {
        std::vector<char> all(kPerRank * kRanks);
        client.allgather(mine.data(), all.data(), kPerRank);
      });
    });
  for (auto& t : ranks) t.join();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status)) << "the hub process died (signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0)
                                 << "): no exception boundary";
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0) << "the hub's failure does not say it ran out of memory";
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(refusals[r].code, aperture::ErrorCode::out_of_memory) << refusals[r].message;
    EXPECT_TRUE(test::contains(refusals[r].message, "the rendezvous hub ran out of memory")) << refusals[r].message;
    EXPECT_TRUE(test::contains(refusals[r].message, "Team call #1")) << refusals[r].message;
  }
#endif
}

}  // namespace
