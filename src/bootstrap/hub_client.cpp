#include "bootstrap/hub_client.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "aperture/detail/host_wait.h"
#include "aperture/error.h"
#include "bootstrap/hub.h"
#include "bootstrap/job_proof.h"
#include "bootstrap/retry.h"
#include "bootstrap/wire.h"
#include "bootstrap/wire_status.h"
#include "common/format.h"

namespace aperture::detail {

namespace {
// How long past the hub's own timeout a rank waits before concluding the hub itself is gone.
constexpr auto kHubMargin = std::chrono::seconds(5);
// How long one of several candidate addresses may take to answer the hello before the next is
// tried. A hub answers at once; a listener still silent is most likely someone else's (torch's
// store waits for its own protocol). It is asked again next round, given twice as long each time.
constexpr auto kFirstCandidateAnswer = std::chrono::milliseconds(500);
constexpr auto kLongestCandidateAnswer = std::chrono::milliseconds(8000);

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

constexpr std::uint64_t kMaxErrorText = std::uint64_t{16} << 20;

// The live clients of this process, for the job watch of host waits. Never destroyed: a wait in
// another thread may ask while the process exits.
struct Watched {
  std::mutex mutex;
  std::vector<HubClient*> clients;
};
Watched& watched() {
  static auto* instance = new Watched;
  return *instance;
}

std::string job_failure() {
  auto& w = watched();
  std::lock_guard lock(w.mutex);
  for (HubClient* client : w.clients)
    if (std::string failure = client->poll_failure(); !failure.empty()) return failure;
  return {};
}
}  // namespace

void SoloTransport::allgather(const void* mine, void* all, std::size_t bytes_each) {
  if (bytes_each != 0 && all != mine) std::memmove(all, mine, bytes_each);
}

void SoloTransport::broadcast(void*, std::size_t, int root) {
  if (root != 0)
    throw Error(ErrorCode::invalid_argument,
                detail::format("broadcast: root {} is out of range; this team has one rank (rank 0)", root));
}

HubClient::HubClient(const std::string& address, int rank, int world_size, const std::string& token,
                     std::chrono::milliseconds timeout)
    : HubClient(std::vector<std::string>{address}, rank, world_size, token, timeout) {}

HubClient::HubClient(const std::vector<std::string>& addresses, int rank, int world_size, const std::string& token,
                     std::chrono::milliseconds timeout)
    : rank_(rank), world_size_(world_size), timeout_(timeout) {
  if (addresses.size() == 1) join(addresses.front(), token);
  else join_first_of(addresses, token);
  auto& w = watched();
  std::lock_guard lock(w.mutex);
  w.clients.push_back(this);
  job_watch.store(&job_failure, std::memory_order_release);
}

// The hub is at `address` or nowhere: whatever else answers there is an error.
void HubClient::join(const std::string& address, const std::string& token) {
  address_ = address;
  fd_ = connect_to(address, std::chrono::steady_clock::now() + timeout_);
  // The hub checks our uid; we check its uid too, so the job token is never handed to a process
  // of another user (abstract names cannot be squatted in advance, but this costs nothing).
  if (!peer_is_same_user(fd_.get()))
    throw Error(
        ErrorCode::mismatch,
        detail::format("rank {}: the process listening at {} runs as another user; refusing to join its job (is "
                       "APERTURE_HUB from another user's job?)",
                       rank_, address_));
  limit_sends();
  const auto deadline = std::chrono::steady_clock::now() + timeout_ + kHubMargin;
  Greeting greeting;
  if (const auto no = greet(token, deadline, greeting))
    throw Error(no->code, detail::format("rank {}: {}", rank_, no->text));
  prove(token, greeting, deadline);
}

// The hub is at one of `addresses`, the first free one when rank 0 bound it (torchrun): an earlier
// one may belong to a process that is not this job's hub (torch's store of a job started on the
// next MASTER_PORT, another job's hub), so a listener that fails the handshake is passed over.
// Each round tries every address in order; rounds go on until the timeout, since rank 0 may not
// be up yet. A hub that proved the token is this job's: its refusal of this rank is final.
void HubClient::join_first_of(const std::vector<std::string>& addresses, const std::string& token) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  // Per address, why it is not the hub: what its listener did when one last answered there (the
  // most telling), else why the last connection failed.
  std::vector<std::string> last_seen(addresses.size());
  std::vector<bool> listened(addresses.size(), false);
  ErrorCode code = ErrorCode::peer_lost;
  auto answer_wait = kFirstCandidateAnswer;
  const bool joined = retry_until(deadline, std::chrono::milliseconds(2), std::chrono::milliseconds(256), [&] {
    for (std::size_t i = 0; i < addresses.size(); ++i) {
      // A candidate gets answer_wait to accept the connection and as long again to answer the hello
      // (within the timeout: a round of eight silent candidates must not run past it).
      if (std::chrono::steady_clock::now() >= deadline) break;
      std::string why;
      fd_ = try_connect(addresses[i], why, std::min(std::chrono::steady_clock::now() + answer_wait, deadline));
      if (!fd_) {
        if (!listened[i]) last_seen[i] = why;
        continue;
      }
      listened[i] = true;
      address_ = addresses[i];
      if (!peer_is_same_user(fd_.get())) {
        last_seen[i] = detail::format("the process listening at {} runs as another user", address_);
        fd_ = Fd();
        continue;
      }
      limit_sends();
      const auto now = std::chrono::steady_clock::now();
      Greeting greeting;
      if (const auto no = greet(token, std::min(now + answer_wait, deadline), greeting)) {
        last_seen[i] = no->text;
        if (no->code == ErrorCode::mismatch) code = ErrorCode::mismatch;
        fd_ = Fd();
        continue;
      }
      prove(token, greeting, now + timeout_ + kHubMargin);
      return Try::done;
    }
    answer_wait = std::min(answer_wait * 2, kLongestCandidateAnswer);
    return Try::again;
  });
  if (joined) return;
  const std::string range = detail::format("{} .. {}", addresses.front(), addresses.back());
  std::string answered;  // one sentence per address that listened
  std::string silent;    // why the first of the others did not
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    if (listened[i]) answered += last_seen[i] + (last_seen[i].ends_with('?') ? " " : ". ");
    else if (silent.empty()) silent = last_seen[i];
  }
  if (answered.empty())
    throw Error(code, detail::format("cannot reach the rendezvous hub at any of {}: {}; is rank 0 (or the launcher) "
                                     "running, and are MASTER_ADDR/MASTER_PORT right?",
                                     range, silent));
  throw Error(code,
              detail::format("rank {}: found no rendezvous hub of this job at any of {} in {} s: {}{}Is rank 0 (or "
                             "the launcher) running, and are MASTER_ADDR/MASTER_PORT right?",
                             rank_, range, std::chrono::duration<double>(timeout_).count(), answered,
                             silent.empty() ? "" : detail::format("Nothing listened at the others ({}). ", silent)));
}

// Writes are bounded too: a hub that stops reading makes a send fail after this long, where it
// would block forever once the socket buffer is full (a large allgather).
void HubClient::limit_sends() {
  const auto send_limit = std::chrono::duration_cast<std::chrono::microseconds>(timeout_ + kHubMargin);
  timeval send_timeout{};
  send_timeout.tv_sec = static_cast<time_t>(send_limit.count() / 1000000);
  send_timeout.tv_usec = static_cast<suseconds_t>(send_limit.count() % 1000000);
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
}

// The handshake (wire.h), rank side, in two steps: the hub must prove it knows the job token
// before this rank proves it does; a listener that cannot is refused and learns nothing it could
// use. First step: send the hello and check the answer's proof.
std::optional<HubClient::NotTheHub> HubClient::greet(const std::string& token,
                                                     std::chrono::steady_clock::time_point deadline,
                                                     Greeting& greeting) {
  auto lost = [&](const char* what) {
    return NotTheHub{ErrorCode::peer_lost,
                     detail::format("the rendezvous hub at {} {}: the launcher, or rank 0 that hosts the hub, exited "
                                    "or was killed (or the address is not this job's hub)",
                                    address_, what)};
  };
  wire::Hello& hello = greeting.hello;
  hello.rank = rank_;
  hello.world_size = world_size_;
  hello.pid = static_cast<std::int32_t>(::getpid());
  hello.challenge = make_challenge();
  wire::set_field(hello.host, host_name());
  if (!write_all(fd_.get(), &hello, sizeof hello)) return lost("closed the connection before this rank's hello was sent");
  wire::HubHello& hub_hello = greeting.hub_hello;
  if (read_all_by(fd_.get(), &hub_hello, sizeof hub_hello, deadline) != ReadEnd::complete)
    return lost("did not answer this rank's hello in time, or closed the connection");
  if (hub_hello.magic != wire::kMagic) return lost("answered the hello with something that is not an aperture hub");
  if (hub_hello.status != 0)
    return NotTheHub{ErrorCode::mismatch, detail::format("the rendezvous hub at {} refused this rank: {}", address_,
                                                         refusal_text(hub_hello.text_bytes, deadline))};
  const Proof expected =
      job_proof(Prover::hub, token, hello.challenge, hub_hello.challenge, hello.rank, hello.world_size);
  if (!same_proof(hub_hello.proof, expected))
    return NotTheHub{
        ErrorCode::mismatch,
        detail::format("the process listening at {} does not know this job's token (its answer to this rank's "
                       "challenge is wrong): it is not this job's hub, or it belongs to another job; refusing to "
                       "join it. Is APERTURE_HUB (or MASTER_ADDR/MASTER_PORT) this job's hub, and APERTURE_JOB_TOKEN "
                       "the same on every rank?",
                       address_)};
  return std::nullopt;
}

// Second step, with a hub that proved the token: prove it back; the hub accepts this rank or says
// why not (a rank given twice, or one that already left), which is final.
void HubClient::prove(const std::string& token, const Greeting& greeting,
                      std::chrono::steady_clock::time_point deadline) {
  auto lost = [&](const char* what) {
    return Error(ErrorCode::peer_lost,
                 detail::format("rank {}: the rendezvous hub at {} {}: the launcher, or rank 0 that hosts the hub, "
                                "exited or was killed",
                                rank_, address_, what));
  };
  const wire::Hello& hello = greeting.hello;
  wire::RankProof proof;
  proof.proof =
      job_proof(Prover::rank, token, hello.challenge, greeting.hub_hello.challenge, hello.rank, hello.world_size);
  if (!write_all(fd_.get(), &proof, sizeof proof)) throw lost("closed the connection before this rank's proof was sent");
  wire::HelloReply answer;
  if (read_all_by(fd_.get(), &answer, sizeof answer, deadline) != ReadEnd::complete)
    throw lost("did not answer this rank's proof in time, or closed the connection");
  if (answer.magic != wire::kMagic) throw lost("answered the proof with something that is not an aperture hub");
  if (answer.status != 0)
    throw Error(ErrorCode::mismatch, detail::format("rank {}: the rendezvous hub at {} refused this rank: {}", rank_,
                                                    address_, refusal_text(answer.text_bytes, deadline)));
}

// The text that follows a refusal (at most 4 KiB of it are read).
std::string HubClient::refusal_text(std::uint64_t text_bytes, std::chrono::steady_clock::time_point deadline) {
  std::string text(std::min<std::uint64_t>(text_bytes, 4096), '\0');
  if (read_all_by(fd_.get(), text.data(), text.size(), deadline) != ReadEnd::complete)
    text = "(the reason was lost with the connection)";
  return text;
}

HubClient::~HubClient() {
  {
    auto& w = watched();
    std::lock_guard lock(w.mutex);
    std::erase(w.clients, this);
  }
  std::lock_guard io(io_mutex_);
  if (fd_ && broken_.empty()) {
    wire::Request goodbye;
    goodbye.op = wire::Op::goodbye;
    goodbye.seq = seq_ + 1;
    write_all(fd_.get(), &goodbye, sizeof goodbye);
  }
  fd_ = Fd();  // closed before waiting below: the hub counts this rank as gone too
  if (hub_) {
    // Rank 0 hosts the hub: keep serving until the others have gone, so their last calls are
    // answered, and a rank arriving late after a failure still hears why (bounded: 2 timeouts).
    hub_->wait_all_left(2 * timeout_);
    hub_.reset();
  }
}

void HubClient::own_hub(std::unique_ptr<Hub> hub) { hub_ = std::move(hub); }

std::string HubClient::poll_failure() {
  std::unique_lock io(io_mutex_, std::try_to_lock);
  if (!io.owns_lock()) return {};  // a Team call is in flight: it will hear the failure itself
  if (!broken_.empty() || !fd_) return broken_;
  if (!wait_readable(fd_.get(), std::chrono::milliseconds(0))) return {};
  // Between calls the hub only speaks to say the job failed, or closes because it is gone.
  wire::Reply notice;
  if (read_all_by(fd_.get(), &notice, sizeof notice, std::chrono::steady_clock::now() + kHubMargin) !=
      ReadEnd::complete) {
    broken_code_ = ErrorCode::peer_lost;
    broken_ = detail::format("rank {}: lost the connection to the rendezvous hub at {} (the launcher, or rank 0 that "
                             "hosts it, exited or was killed)",
                             rank_, address_);
    return broken_;
  }
  take_notice(notice);
  return broken_;
}

std::string HubClient::take_notice(const wire::Reply& notice) {
  if (notice.magic != wire::kMagic || notice.seq != 0 || notice.status == 0 || notice.payload_bytes > kMaxErrorText) {
    broken_code_ = ErrorCode::mismatch;
    broken_ = detail::format("rank {}: the rendezvous hub at {} sent something that is not an answer (magic {:#x}, "
                             "call #{}, status {}, {} bytes); is APERTURE_HUB (or MASTER_ADDR/MASTER_PORT) this job's hub?",
                             rank_, address_, notice.magic, notice.seq, notice.status, notice.payload_bytes);
    return broken_;
  }
  std::string text(notice.payload_bytes, '\0');
  if (read_all_by(fd_.get(), text.data(), text.size(), std::chrono::steady_clock::now() + kHubMargin) !=
      ReadEnd::complete)
    text = "(the rest of the reason was lost with the connection, or did not come within 5 s)";
  broken_code_ = wire::code_of_status(notice.status);
  broken_ = detail::format("rank {}: the job failed: {}", rank_, text);
  return broken_;
}

std::string HubClient::call(int op, std::uint64_t bytes, int root, const void* payload, std::uint64_t payload_bytes) {
  std::lock_guard io(io_mutex_);
  if (!broken_.empty()) throw Error(broken_code_, broken_);
  if (bytes > wire::kMaxPayload)
    throw Error(
        ErrorCode::invalid_argument,
        detail::format("rank {}: Team {} of {} bytes exceeds the rendezvous limit of {} bytes per rank; the Team "
                       "carries set-up data, move bulk data through symmetric memory",
                       rank_, wire::op_name(static_cast<wire::Op>(op)), bytes, wire::kMaxPayload));
  if (static_cast<wire::Op>(op) == wire::Op::allgather &&
      bytes * static_cast<std::uint64_t>(world_size_) > wire::kMaxAnswer)
    throw Error(ErrorCode::invalid_argument,
                detail::format("rank {}: Team allgather of {} bytes per rank x {} ranks = {} bytes exceeds the "
                               "rendezvous limit of {} bytes per answer (every rank and the hub hold all of it); the "
                               "Team carries set-up data, move bulk data through symmetric memory",
                               rank_, bytes, world_size_, bytes * static_cast<std::uint64_t>(world_size_),
                               wire::kMaxAnswer));
  wire::Request request;
  request.op = static_cast<wire::Op>(op);
  request.seq = ++seq_;
  request.root = root;
  request.bytes = bytes;
  request.payload_bytes = payload_bytes;
  const char* name = wire::op_name(request.op);
  auto lost = [&](const char* what) {
    broken_code_ = ErrorCode::peer_lost;
    broken_ = detail::format("rank {}: {} #{} failed: {} the rendezvous hub at {} (the launcher, or rank 0 that hosts it, "
                     "exited or was killed)",
                     rank_, name, request.seq, what, address_);
    return Error(broken_code_, broken_);
  };
  std::string message(sizeof request + payload_bytes, '\0');
  std::memcpy(message.data(), &request, sizeof request);
  if (payload_bytes != 0) std::memcpy(message.data() + sizeof request, payload, payload_bytes);
  if (!write_all(fd_.get(), message.data(), message.size())) throw lost("cannot write to");
  if (!wait_readable(fd_.get(), timeout_ + kHubMargin)) {
    broken_code_ = ErrorCode::timeout;
    broken_ = detail::format("rank {}: {} #{} got no answer from the rendezvous hub at {} within {} s", rank_, name,
                     request.seq, address_, std::chrono::duration<double>(timeout_ + kHubMargin).count());
    throw Error(broken_code_, broken_);
  }
  // The answer has begun: the rest of it must come within the same bound, counted from now, so a
  // hub that stops in the middle of an answer cannot hold this rank forever.
  const auto rest_by = std::chrono::steady_clock::now() + timeout_ + kHubMargin;
  auto read_rest = [&](void* data, std::size_t size) {
    switch (read_all_by(fd_.get(), data, size, rest_by)) {
      case ReadEnd::complete: return;
      case ReadEnd::closed: throw lost("lost the connection to");
      case ReadEnd::deadline: break;
    }
    broken_code_ = ErrorCode::timeout;
    broken_ = detail::format("rank {}: {} #{}: the rendezvous hub at {} began its answer but did not finish it within "
                             "{} s (it stopped sending mid-answer); is it this job's hub, and is it alive?",
                             rank_, name, request.seq, address_,
                             std::chrono::duration<double>(timeout_ + kHubMargin).count());
    throw Error(broken_code_, broken_);
  };
  wire::Reply reply;
  read_rest(&reply, sizeof reply);
  // The job failed while this rank was away; the hub told us unasked, before any answer.
  if (reply.seq == 0 && reply.magic == wire::kMagic && reply.status != 0) {
    std::string notice = take_notice(reply);
    throw Error(broken_code_, notice);
  }
  // A result has exactly the size the call implies, an error text is short: anything else is
  // not our hub talking, and nothing of that size is allocated.
  const std::uint64_t expected = request.op == wire::Op::allgather   ? bytes * static_cast<std::uint64_t>(world_size_)
                                 : request.op == wire::Op::broadcast ? bytes
                                                                     : 0;
  if (reply.magic != wire::kMagic || reply.seq != request.seq ||
      (reply.status == 0 ? reply.payload_bytes != expected : reply.payload_bytes > kMaxErrorText)) {
    broken_code_ = ErrorCode::mismatch;
    broken_ = detail::format("rank {}: {} #{} got a malformed answer from the rendezvous hub at {} (magic {:#x}, call #{}, "
                     "status {}, {} bytes); is APERTURE_HUB (or MASTER_ADDR/MASTER_PORT) this job's hub?",
                     rank_, name, request.seq, address_, reply.magic, reply.seq, reply.status, reply.payload_bytes);
    throw Error(broken_code_, broken_);
  }
  std::string result(reply.payload_bytes, '\0');
  read_rest(result.data(), result.size());
  if (reply.status != 0) {
    broken_code_ = wire::code_of_status(reply.status);
    broken_ = detail::format("rank {}: Team {} (call #{}) failed: {}", rank_, name, request.seq, result);
    throw Error(broken_code_, broken_);
  }
  return result;
}

void HubClient::barrier() { call(static_cast<int>(wire::Op::barrier), 0, -1, nullptr, 0); }

void HubClient::allgather(const void* mine, void* all, std::size_t bytes_each) {
  const std::string result = call(static_cast<int>(wire::Op::allgather), bytes_each, -1, mine, bytes_each);
  if (!result.empty()) std::memcpy(all, result.data(), result.size());
}

void HubClient::broadcast(void* buf, std::size_t bytes, int root) {
  const bool is_root = root == rank_;
  const std::string result =
      call(static_cast<int>(wire::Op::broadcast), bytes, root, is_root ? buf : nullptr, is_root ? bytes : 0);
  if (!is_root && bytes != 0) std::memcpy(buf, result.data(), bytes);
}

}  // namespace aperture::detail
