// A rank talking to something that is not its job's hub: a listener that accepts the rank's
// hello, then answers its first call wrongly. The rank must throw an aperture::Error naming the
// malformed answer, must not allocate what the answer announces, and every later call must
// repeat the error instead of reading on from a stream it no longer understands.
#include <gtest/gtest.h>

#include <aperture/aperture.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "../common/error_of.h"
#include "bootstrap/hub_client.h"
#include "bootstrap/socket.h"
#include "bootstrap/wire.h"

namespace {

namespace wire = aperture::detail::wire;
using aperture::detail::read_all;
using aperture::detail::write_all;

// How the impostor answers the first call.
enum class Answer { too_large, another_call, not_a_hub, huge_notice };

// Accepts one rank, takes its hello and its first request (with payload), answers it as told,
// then keeps the connection open until the rank is done.
class ImpostorHub {
 public:
  explicit ImpostorHub(Answer answer) : listener_(aperture::detail::listen_unix()) {
    thread_ = std::thread([this, answer] { serve(answer); });
  }
  ~ImpostorHub() { thread_.join(); }
  const std::string& address() const { return listener_.address; }

 private:
  void serve(Answer answer) {
    const aperture::detail::Fd fd(::accept(listener_.fd.get(), nullptr, nullptr));
    if (!fd) return;
    wire::Hello hello;
    if (!read_all(fd.get(), &hello, sizeof hello)) return;
    const wire::HelloReply accepted;
    if (!write_all(fd.get(), &accepted, sizeof accepted)) return;
    wire::Request request;
    if (!read_all(fd.get(), &request, sizeof request)) return;
    std::vector<char> payload(request.payload_bytes);
    if (!payload.empty() && !read_all(fd.get(), payload.data(), payload.size())) return;
    wire::Reply reply;
    reply.seq = request.seq;
    reply.payload_bytes = request.bytes * 2;  // an allgather of 2 ranks' worth: right for 2
    switch (answer) {
      case Answer::too_large: reply.payload_bytes = std::uint64_t{1} << 40; break;  // 1 TiB "result"
      case Answer::another_call: reply.seq = request.seq + 7; break;
      case Answer::not_a_hub: reply.magic = 0x48545450; break;  // "HTTP"
      case Answer::huge_notice:  // "the job failed", unasked, with a 1 TiB reason
        reply.seq = 0;
        reply.status = 1;
        reply.payload_bytes = std::uint64_t{1} << 40;
        break;
    }
    if (!write_all(fd.get(), &reply, sizeof reply)) return;
    char byte = 0;
    (void)read_all(fd.get(), &byte, 1);  // until the rank closes (its goodbye, or its end)
  }

  aperture::detail::Listener listener_;
  std::thread thread_;
};

// What the first Team call through the impostor threw (and the second's message, if asked). Every
// refusal here is a mismatch: the peer is not this job's hub.
test::Refusal first_call_refusal(Answer answer, std::string* second = nullptr) {
  ImpostorHub hub(answer);
  aperture::detail::HubClient client(hub.address(), 0, 2, "token", std::chrono::milliseconds(5000));
  const std::uint64_t mine = 42;
  std::uint64_t all[2] = {};
  const test::Refusal first = test::refusal_of([&] { client.allgather(&mine, all, sizeof mine); });
  if (second != nullptr) *second = test::error_of([&] { client.barrier(); });
  return first;
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

}  // namespace
