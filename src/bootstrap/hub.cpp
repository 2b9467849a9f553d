#include "bootstrap/hub.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <condition_variable>
#include <exception>
#include <map>
#include <new>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "aperture/error.h"
#include "bootstrap/job_proof.h"
#include "bootstrap/socket.h"
#include "bootstrap/wire.h"
#include "bootstrap/wire_status.h"
#include "common/format.h"

namespace aperture::detail {

namespace {

using clock = std::chrono::steady_clock;
constexpr auto kHelloTimeout = std::chrono::seconds(10);

struct Connection {
  Fd fd;
  std::string input;        // bytes received, not yet parsed
  int rank = -1;            // -1 until the handshake is done
  clock::time_point accepted;
  // Set once the hello was answered with the hub's proof: the rank's proof comes next.
  std::optional<wire::Hello> hello;
  Challenge hub_challenge = {};
  // Payload bytes still to come of a request already answered with the job's failure: they pass
  // unread instead of being buffered.
  std::uint64_t skip = 0;
};

struct Arrival {
  wire::Request request;
  std::string payload;
};

// "ranks 0, 2-5" style list.
std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!text.empty()) text += ", ";
    text += j == i ? std::to_string(ranks[i]) : detail::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return (ranks.size() == 1 ? "rank " : "ranks ") + text;
}

std::string describe(const wire::Request& r) {
  switch (r.op) {
    case wire::Op::barrier: return "barrier";
    case wire::Op::allgather: return detail::format("allgather of {} bytes each", r.bytes);
    case wire::Op::broadcast: return detail::format("broadcast of {} bytes from root {}", r.bytes, r.root);
    case wire::Op::goodbye: return "leave the team";
  }
  return "?";
}

}  // namespace

struct Hub::State {
  HubOptions options;
  Listener listener;
  Fd wake;  // eventfd: stop request or a reported rank exit
  std::thread thread;

  std::vector<Connection> connections;
  std::vector<int> connection_of_rank;  // index into connections, or -1
  std::vector<bool> left;               // rank said goodbye
  std::vector<std::string> rank_label;  // "rank 3 (pid 123 on host)"

  // The open round: every rank's request for call number `seq`.
  std::uint64_t seq = 1;
  std::map<int, Arrival> arrivals;
  clock::time_point round_started;

  mutable std::mutex mutex;  // guards the fields below, shared with the owner's thread
  std::condition_variable changed;
  std::string failure;
  ErrorCode failure_code = ErrorCode::internal;  // sent to the ranks as the replies' status
  bool stopping = false;
  std::vector<std::pair<int, std::string>> reported_exits;
  int ranks_gone = 0;  // ranks that said goodbye or whose connection closed
  std::vector<bool> gone;

  void mark_gone(int rank) {
    {
      std::lock_guard lock(mutex);
      if (gone[rank]) return;
      gone[rank] = true;
      ++ranks_gone;
    }
    changed.notify_all();
  }

  void run();
  void serve();
  // Frees what the open round holds (its payloads), so a failure notice can be built after an
  // allocation failed.
  void arrivals_payload_release() {
    for (auto& [rank, a] : arrivals) std::string().swap(a.payload);
    for (auto& c : connections)
      if (c.input.empty()) std::string().swap(c.input);  // a partial request stays, to keep the stream in step
  }
  void accept_connection();
  void read_from(std::size_t index);
  bool parse_hello(Connection& c);
  bool parse_rank_proof(Connection& c);
  std::string refusal_for_rank(int rank) const;
  bool parse_requests(Connection& c);
  void on_request(int rank, Arrival arrival);
  void complete_round();
  void fail(ErrorCode code, const std::string& reason);
  void drop(std::size_t index, const std::string& why_if_rank_lost);
  void reply(int rank, int status, std::uint64_t seq_number, const std::string& payload);
  void check_deadlines();
  std::int32_t failure_status() const {
    std::lock_guard lock(mutex);
    return wire::status_of(failure_code);
  }
  std::string failure_text() const {
    std::lock_guard lock(mutex);
    return failure;
  }
};

Hub::Hub(HubOptions options) : state_(std::make_unique<State>()) {
  auto& s = *state_;
  if (options.world_size < 1 || options.world_size > wire::kMaxWorldSize)
    throw Error(ErrorCode::invalid_argument,
                detail::format("hub: world size {} is outside 1..{}", options.world_size, wire::kMaxWorldSize));
  s.options = std::move(options);
  s.listener = s.options.transport == "tcp"
                   ? listen_tcp(s.options.bind_host, s.options.bind_port, s.options.advertise_host.empty()
                                                                                 ? s.options.bind_host
                                                                                 : s.options.advertise_host)
                   : listen_unix();
  s.wake = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!s.wake)
    throw Error(ErrorCode::system, detail::format("hub: eventfd failed: {}", std::strerror(errno)), "eventfd");
  const int n = s.options.world_size;
  s.connection_of_rank.assign(n, -1);
  s.left.assign(n, false);
  s.gone.assign(n, false);
  s.rank_label.resize(n);
  for (int r = 0; r < n; ++r) s.rank_label[r] = detail::format("rank {}", r);
  s.thread = std::thread([&s] { s.run(); });
}

Hub::~Hub() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(state_->wake.get(), &one, sizeof one);
  if (state_->thread.joinable()) state_->thread.join();
}

std::string Hub::address() const { return state_->listener.address; }

void Hub::report_rank_exit(int rank, const std::string& description) {
  {
    std::lock_guard lock(state_->mutex);
    state_->reported_exits.emplace_back(rank, description);
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(state_->wake.get(), &one, sizeof one);
}

bool Hub::wait_all_left(std::chrono::milliseconds timeout) {
  std::unique_lock lock(state_->mutex);
  // Even after a failure the hub keeps serving until every rank has gone, so that a rank arriving
  // late still hears why the job failed instead of finding the hub vanished.
  return state_->changed.wait_for(lock, timeout, [&] { return state_->ranks_gone == state_->options.world_size; });
}

std::string Hub::failure() const { return state_->failure_text(); }

std::string make_job_token() { return make_random_hex(16); }

// The thread's exception boundary. Nothing may escape a std::thread (std::terminate would take
// the launcher or rank 0 with it): an exception while serving, such as bad_alloc from a large
// legal allgather (bytes x ranks), fails the job with its reason and the hub goes on answering
// every rank with it. Should even that fail, every connection is closed, so each rank learns at
// once that the hub is gone instead of waiting for its timeout.
void Hub::State::run() {
  for (int failures = 0;; ++failures) {
    try {
      serve();
      return;
    } catch (const std::exception& e) {
      if (failures == 0) {
        try {
          const bool memory = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
          arrivals_payload_release();
          fail(memory ? ErrorCode::out_of_memory : ErrorCode::internal,
               memory ? detail::format("the rendezvous hub ran out of memory serving Team call #{} ({}); the Team "
                                       "carries set-up data: move bulk data through symmetric memory, or lower "
                                       "the bytes x ranks of the call",
                                       seq, e.what())
                      : detail::format("the rendezvous hub failed serving Team call #{}: {}", seq, e.what()));
          continue;
        } catch (...) {
        }
      }
    } catch (...) {
      if (failures == 0) {
        try {
          fail(ErrorCode::internal, detail::format("the rendezvous hub failed serving Team call #{}", seq));
          continue;
        } catch (...) {
        }
      }
    }
    {
      std::lock_guard lock(mutex);
      if (failure.empty()) {
        failure = "the rendezvous hub failed and stopped";
        failure_code = ErrorCode::internal;
      }
    }
    connections.clear();  // every rank sees the hub gone at once
    listener.fd = Fd();   // and so does every rank still to come
    for (int rank = 0; rank < options.world_size; ++rank) {
      connection_of_rank[rank] = -1;
      mark_gone(rank);
    }
    return;
  }
}

void Hub::State::serve() {
  for (;;) {
    {
      std::lock_guard lock(mutex);
      if (stopping) return;
    }
    std::vector<pollfd> fds;
    fds.push_back({listener.fd.get(), POLLIN, 0});
    fds.push_back({wake.get(), POLLIN, 0});
    for (auto& c : connections) fds.push_back({c.fd.get(), POLLIN, 0});
    const int rc = ::poll(fds.data(), fds.size(), 200);
    if (rc < 0 && errno != EINTR) {
      fail(ErrorCode::system, detail::format("hub: poll failed: {}", std::strerror(errno)));
      return;
    }
    // Connections first (their indices shift when one is dropped), newest last.
    for (std::size_t i = connections.size(); i-- > 0;)
      if (fds[i + 2].revents != 0) read_from(i);
    if (fds[1].revents != 0) {
      std::uint64_t count = 0;
      [[maybe_unused]] auto n = ::read(wake.get(), &count, sizeof count);
      std::vector<std::pair<int, std::string>> exits;
      {
        std::lock_guard lock(mutex);
        exits.swap(reported_exits);
      }
      for (auto& [rank, text] : exits) {
        if (rank < 0 || rank >= options.world_size) continue;
        // A rank that exited wrote everything it sent before it died: read what is still in
        // its socket (a goodbye, say) before judging that it left without a word.
        for (int index = connection_of_rank[rank]; index >= 0 && !left[rank]; index = connection_of_rank[rank]) {
          const std::size_t before = connections[index].input.size();
          if (!wait_readable(connections[index].fd.get(), std::chrono::milliseconds(0))) break;
          read_from(static_cast<std::size_t>(index));
          if (connection_of_rank[rank] >= 0 && connections[connection_of_rank[rank]].input.size() == before) break;
        }
        if (!left[rank]) fail(ErrorCode::peer_lost, text);
      }
    }
    if (fds[0].revents & POLLIN) accept_connection();
    check_deadlines();
  }
}

void Hub::State::accept_connection() {
  Fd fd(::accept4(listener.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd) return;
  // Abstract Unix sockets have no file permissions: the uid check is what keeps other users out.
  if (!peer_is_same_user(fd.get())) return;
  set_low_latency(fd.get());
  Connection& c = connections.emplace_back();
  c.fd = std::move(fd);
  c.accepted = clock::now();
}

void Hub::State::read_from(std::size_t index) {
  Connection& c = connections[index];
  char buffer[65536];
  const ssize_t n = ::recv(c.fd.get(), buffer, sizeof buffer, MSG_DONTWAIT);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    drop(index, "lost its connection to the hub without leaving the team: the process exited or was killed");
    return;
  }
  std::string_view incoming(buffer, static_cast<std::size_t>(n));
  const std::size_t skipped = static_cast<std::size_t>(std::min<std::uint64_t>(c.skip, incoming.size()));
  c.skip -= skipped;
  incoming.remove_prefix(skipped);
  if (incoming.empty()) return;
  try {
    c.input.append(incoming);
  } catch (const std::bad_alloc&) {
    if (c.rank < 0 || c.input.size() < sizeof(wire::Request)) throw;
    // The bytes are (at least at first) the payload of the request at the head of the buffer,
    // whose header was checked. Fail the job, answer that request now, and let the rest of its
    // payload pass unread, so the rank's stream stays in step and it hears why.
    wire::Request request;
    std::memcpy(&request, c.input.data(), sizeof request);
    const std::uint64_t missing = sizeof request + request.payload_bytes - c.input.size();
    std::string().swap(c.input);
    fail(ErrorCode::out_of_memory,
         detail::format("the rendezvous hub ran out of memory buffering {}'s {} (Team call #{}); the Team carries "
                        "set-up data: move bulk data through symmetric memory, or lower the bytes x ranks of the call",
                        rank_label[c.rank], describe(request), request.seq));
    reply(c.rank, failure_status(), request.seq, failure_text());
    if (incoming.size() <= missing) {
      c.skip = missing - incoming.size();
      return;
    }
    incoming.remove_prefix(static_cast<std::size_t>(missing));
    c.input.assign(incoming);
  }
  const bool keep = c.rank < 0 ? parse_hello(c) : parse_requests(c);
  if (!keep) drop(index, "sent a malformed request");
}

// The handshake, hub side: answer the rank's challenge with our proof of the token, then judge
// the rank's proof of it. A refused connection is dropped and changes nothing.
bool Hub::State::parse_hello(Connection& c) {
  if (c.hello) return parse_rank_proof(c);
  if (c.input.size() < sizeof(wire::Hello)) return true;
  wire::Hello hello;
  std::memcpy(&hello, c.input.data(), sizeof hello);
  c.input.erase(0, sizeof hello);
  // Whether the rank is free is told only to a peer that proved the token (parse_rank_proof).
  const std::string refusal = wire::validate_hello(hello, options.world_size);
  wire::HubHello answer;
  if (!refusal.empty()) {
    answer.status = 1;
    answer.text_bytes = refusal.size();
    write_all(c.fd.get(), &answer, sizeof answer);
    write_all(c.fd.get(), refusal.data(), refusal.size());
    return false;
  }
  c.hub_challenge = make_challenge();
  answer.challenge = c.hub_challenge;
  answer.proof =
      job_proof(Prover::hub, options.token, hello.challenge, c.hub_challenge, hello.rank, hello.world_size);
  if (!write_all(c.fd.get(), &answer, sizeof answer)) return false;
  c.hello = hello;
  return parse_rank_proof(c);
}

bool Hub::State::parse_rank_proof(Connection& c) {
  if (c.input.size() < sizeof(wire::RankProof)) return true;
  wire::RankProof proof;
  std::memcpy(&proof, c.input.data(), sizeof proof);
  c.input.erase(0, sizeof proof);
  const wire::Hello& hello = *c.hello;
  std::string refusal = wire::validate_rank_proof(proof, hello, c.hub_challenge, options.token);
  if (refusal.empty()) refusal = refusal_for_rank(hello.rank);
  wire::HelloReply answer;
  answer.status = refusal.empty() ? 0 : 1;
  answer.text_bytes = refusal.size();
  write_all(c.fd.get(), &answer, sizeof answer);
  if (!refusal.empty()) {
    write_all(c.fd.get(), refusal.data(), refusal.size());
    return false;  // a stranger changes nothing: drop it
  }
  c.rank = hello.rank;
  connection_of_rank[c.rank] = static_cast<int>(&c - connections.data());
  rank_label[c.rank] =
      detail::format("rank {} (pid {} on {})", hello.rank, hello.pid, wire::get_field(hello.host));
  return parse_requests(c);
}

std::string Hub::State::refusal_for_rank(int rank) const {
  if (connection_of_rank[rank] != -1)
    return detail::format("rank {} is already connected; two processes were given the same rank", rank);
  if (left[rank]) return detail::format("rank {} already left this job", rank);
  return {};
}

bool Hub::State::parse_requests(Connection& c) {
  while (c.input.size() >= sizeof(wire::Request)) {
    wire::Request request;
    std::memcpy(&request, c.input.data(), sizeof request);
    if (!wire::validate_request(request, options.world_size).empty()) return false;
    if (c.input.size() < sizeof request + request.payload_bytes) {
      if (failure_text().empty()) return true;
      // The job failed: answer now, and let the payload pass unread instead of buffering it.
      c.skip = sizeof request + request.payload_bytes - c.input.size();
      std::string().swap(c.input);
      reply(c.rank, failure_status(), request.seq, failure_text());
      return true;
    }
    Arrival arrival{request, c.input.substr(sizeof request, request.payload_bytes)};
    c.input.erase(0, sizeof request + request.payload_bytes);
    on_request(c.rank, std::move(arrival));
  }
  return true;
}

void Hub::State::on_request(int rank, Arrival arrival) {
  const wire::Request& r = arrival.request;
  if (r.op == wire::Op::goodbye) {
    left[rank] = true;
    mark_gone(rank);
    if (!arrivals.empty())
      fail(ErrorCode::mismatch,
           detail::format(
               "{} left the team (its Team was destroyed) while {} wait in call #{} ({}); every rank must make "
               "the same Team calls",
               rank_label[rank], rank_list([&] {
                 std::vector<int> v;
                 for (auto& [k, a] : arrivals) v.push_back(k);
                 return v;
               }()),
               seq, describe(arrivals.begin()->second.request)));
    return;
  }
  const std::string failed = failure_text();
  if (!failed.empty()) {
    reply(rank, failure_status(), r.seq, failed);
    return;
  }
  if (r.seq != seq) {
    fail(ErrorCode::mismatch,
         detail::format("{} sent call #{} while the team is at call #{}", rank_label[rank], r.seq, seq));
    reply(rank, failure_status(), r.seq, failure_text());
    return;
  }
  if (arrivals.empty()) round_started = clock::now();
  arrivals[rank] = std::move(arrival);
  for (int other = 0; other < options.world_size; ++other)
    if (left[other]) {
      fail(ErrorCode::mismatch,
           detail::format(
               "{} called {} (call #{}) but {} already left the team (destroyed its Team); every rank must make "
               "the same Team calls",
               rank_label[rank], describe(r), seq, rank_label[other]));
      return;
    }
  if (static_cast<int>(arrivals.size()) == options.world_size) complete_round();
}

void Hub::State::complete_round() {
  // Group the ranks by what they asked for; more than one group is a mismatch.
  std::map<std::string, std::vector<int>> groups;
  for (auto& [rank, a] : arrivals) groups[describe(a.request)].push_back(rank);
  if (groups.size() > 1) {
    std::string detail;
    for (auto& [what, ranks] : groups) detail += detail::format("\n  {}: {}", rank_list(ranks), what);
    fail(ErrorCode::mismatch,
         detail::format(
             "collective call mismatch at Team call #{}:{}\nEvery rank must make the same Team calls (barrier, "
             "allgather, broadcast, allocate, free) in the same order with the same sizes.",
             seq, detail));
    return;
  }
  const wire::Request& first = arrivals.begin()->second.request;
  std::string result;
  if (first.op == wire::Op::allgather) {
    result.reserve(first.bytes * arrivals.size());
    for (auto& [rank, a] : arrivals) result += a.payload;
  } else if (first.op == wire::Op::broadcast) {
    result = arrivals[first.root].payload;
    if (result.size() != first.bytes) {
      fail(ErrorCode::mismatch, detail::format("broadcast #{}: root {} sent {} bytes, expected {}", seq, first.root,
                                               result.size(), first.bytes));
      return;
    }
  }
  for (auto& [rank, a] : arrivals) reply(rank, 0, seq, result);
  arrivals.clear();
  ++seq;
}

void Hub::State::fail(ErrorCode code, const std::string& reason) {
  {
    std::lock_guard lock(mutex);
    if (!failure.empty()) return;
    failure = reason;
    failure_code = code;
  }
  changed.notify_all();
  const std::int32_t status = wire::status_of(code);
  for (auto& [rank, a] : arrivals) reply(rank, status, a.request.seq, reason);
  // The ranks not waiting on us hear it too, unasked (call number 0): one blocked on a flag that
  // a dead rank will never signal learns it through the job watch of its host wait.
  constexpr std::size_t kMaxNotice = 4096;  // small enough to sit in any socket buffer unread
  const std::string notice = reason.size() <= kMaxNotice ? reason : reason.substr(0, kMaxNotice) + " [...]";
  for (int rank = 0; rank < options.world_size; ++rank)
    if (connection_of_rank[rank] >= 0 && arrivals.count(rank) == 0) reply(rank, status, 0, notice);
  arrivals.clear();
}

void Hub::State::drop(std::size_t index, const std::string& why_if_rank_lost) {
  const int rank = connections[index].rank;
  connections.erase(connections.begin() + static_cast<std::ptrdiff_t>(index));
  for (auto& c : connection_of_rank)
    if (c > static_cast<int>(index)) --c;
  if (rank < 0) return;
  connection_of_rank[rank] = -1;
  mark_gone(rank);
  if (!left[rank]) fail(ErrorCode::peer_lost, detail::format("{} {}", rank_label[rank], why_if_rank_lost));
}

void Hub::State::reply(int rank, int status, std::uint64_t seq_number, const std::string& payload) {
  const int index = connection_of_rank[rank];
  if (index < 0) return;
  wire::Reply header;
  header.status = status;
  header.seq = seq_number;
  header.payload_bytes = payload.size();
  // One write per reply: a header and payload sent apart would wait on the peer's delayed ACK.
  std::string message(sizeof header + payload.size(), '\0');
  std::memcpy(message.data(), &header, sizeof header);
  std::memcpy(message.data() + sizeof header, payload.data(), payload.size());
  write_all(connections[index].fd.get(), message.data(), message.size());
}

void Hub::State::check_deadlines() {
  const auto now = clock::now();
  for (std::size_t i = connections.size(); i-- > 0;)
    if (connections[i].rank < 0 && now - connections[i].accepted > kHelloTimeout) drop(i, "");
  if (arrivals.empty() || now - round_started < options.timeout) return;
  std::vector<int> missing, waiting;
  for (int r = 0; r < options.world_size; ++r) (arrivals.count(r) ? waiting : missing).push_back(r);
  std::string never;
  for (int r : missing)
    if (connection_of_rank[r] < 0) never += detail::format(" rank {} never connected.", r);
  fail(ErrorCode::timeout,
       detail::format(
           "{} did not arrive at Team call #{} ({}) within {} s; {} waited.{} Is a rank stuck, or did it skip the "
           "call? Raise APERTURE_TIMEOUT if it is only slow.",
           rank_list(missing), seq, describe(arrivals.begin()->second.request),
           std::chrono::duration<double>(options.timeout).count(), rank_list(waiting), never));
}

}  // namespace aperture::detail
