// fuzz_hub: the rendezvous hub's byte-stream parser, end to end.
//
// Each input starts a real Hub (abstract Unix socket, a small world, token "fuzz-token"), opens
// one connection per rank and writes the input's bytes into them, reading whatever the hub
// answers. Input: byte 0 the world size (1..3); byte 1 which connections first go through the
// handshake for their rank, as a rank does (bit i: hello, the hub's proof checked, the rank's
// proof, accepted; the others send only what the records give); then records:
//   tag, with connection = tag % world size and kind = tag / 4 % 4:
//     0  raw bytes: a length byte, then that many bytes
//     1  a well-formed request: op, seq, root (int8) and a 16-bit size; its payload follows
//     2  a request header whose fields after the magic come from the next 36 bytes
//     3  the connection ends (end of file to the hub)
// Then every connection ends. Properties: no crash or sanitizer report; a handshake made as a
// rank makes it is accepted, and the hub's proof in it checks out (the valid direction); the hub
// closes every connection within 5 s of its end of file (a hub that stops serving hangs a job).
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/hub.h"
#include "bootstrap/job_proof.h"
#include "bootstrap/socket.h"
#include "bootstrap/wire.h"
#include "fuzz_check.h"

using namespace aperture::detail;

namespace {

struct Peer {
  Fd fd;
  std::string outgoing;
  bool end_requested = false;  // shut down our writing side once `outgoing` is sent
  bool write_closed = false;
  bool hub_closed = false;
};

struct Reader {
  const std::uint8_t* data;
  std::size_t size;
  std::uint8_t byte() {
    if (size == 0) return 0;
    --size;
    return *data++;
  }
  std::string bytes(std::size_t n) {
    n = n < size ? n : size;
    std::string out(reinterpret_cast<const char*>(data), n);
    data += n;
    size -= n;
    return out;
  }
};

template <class T>
std::string raw(const T& value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof value);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in{data, size};
  HubOptions options;
  options.world_size = 1 + in.byte() % 3;
  options.token = "fuzz-token";
  options.timeout = std::chrono::seconds(30);
  const std::uint8_t hellos = in.byte();
  Hub hub(options);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::vector<Peer> peers(static_cast<std::size_t>(options.world_size));
  for (int r = 0; r < options.world_size; ++r) {
    Peer& peer = peers[static_cast<std::size_t>(r)];
    peer.fd = connect_to(hub.address(), deadline);
    if (hellos & (1u << r)) {
      wire::Hello hello;
      hello.rank = r;
      hello.world_size = options.world_size;
      hello.pid = 1;
      hello.challenge = make_challenge();
      wire::set_field(hello.host, "fuzz");
      wire::HubHello hub_hello;
      FUZZ_CHECK(write_all(peer.fd.get(), &hello, sizeof hello) &&
                     read_all_by(peer.fd.get(), &hub_hello, sizeof hub_hello, deadline) == ReadEnd::complete,
                 "the hub did not answer a well-formed hello for rank %d", r);
      FUZZ_CHECK(hub_hello.status == 0, "the hub refused a well-formed hello for rank %d", r);
      FUZZ_CHECK(same_proof(hub_hello.proof, job_proof(Prover::hub, options.token, hello.challenge,
                                                       hub_hello.challenge, r, options.world_size)),
                 "the hub's proof of the token does not check out");
      wire::RankProof proof;
      proof.proof = job_proof(Prover::rank, options.token, hello.challenge, hub_hello.challenge, r, options.world_size);
      wire::HelloReply verdict;
      FUZZ_CHECK(write_all(peer.fd.get(), &proof, sizeof proof) &&
                     read_all_by(peer.fd.get(), &verdict, sizeof verdict, deadline) == ReadEnd::complete,
                 "the hub did not answer rank %d's proof", r);
      FUZZ_CHECK(verdict.status == 0, "the hub refused rank %d's proof of the job's token", r);
    }
    ::fcntl(peer.fd.get(), F_SETFL, O_NONBLOCK);
  }
  while (in.size > 0) {
    const std::uint8_t tag = in.byte();
    Peer& peer = peers[tag % peers.size()];
    std::string message;
    switch (tag / 4 % 4) {
      case 0: message = in.bytes(in.byte()); break;
      case 1: {
        wire::Request request;
        request.op = static_cast<wire::Op>(1 + in.byte() % 5);  // 5: one past the last operation
        request.seq = in.byte() % 4;
        request.root = static_cast<std::int8_t>(in.byte());
        request.bytes = in.byte() | (std::uint64_t{in.byte()} << 8);
        request.payload_bytes = request.op == wire::Op::barrier || request.op == wire::Op::goodbye ? 0 : request.bytes;
        message = raw(request) + std::string(request.payload_bytes, 'p');
        break;
      }
      case 2: {
        wire::Request request;
        std::string fields = in.bytes(sizeof request - sizeof request.magic);
        fields.resize(sizeof request - sizeof request.magic, '\0');
        std::memcpy(reinterpret_cast<char*>(&request) + sizeof request.magic, fields.data(), fields.size());
        message = raw(request);
        break;
      }
      case 3: peer.end_requested = true; break;
    }
    if (!peer.end_requested) peer.outgoing += message;  // nothing follows an end of file
  }
  for (auto& peer : peers) peer.end_requested = true;

  // Write what each connection has to say while reading (and dropping) every answer, until the
  // hub has closed every connection.
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Peer*> owners;
    for (auto& peer : peers) {
      if (!peer.write_closed && peer.outgoing.empty() && peer.end_requested) {
        ::shutdown(peer.fd.get(), SHUT_WR);
        peer.write_closed = true;
      }
      if (peer.hub_closed) continue;
      short events = POLLIN;
      if (!peer.write_closed && !peer.outgoing.empty()) events |= POLLOUT;
      fds.push_back({peer.fd.get(), events, 0});
      owners.push_back(&peer);
    }
    if (fds.empty()) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    FUZZ_CHECK(left.count() > 0, "the hub did not close a connection within 5 s of its end of file: it hangs");
    ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    for (std::size_t i = 0; i < fds.size(); ++i) {
      Peer& peer = *owners[i];
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buffer[65536];
        const ssize_t n = ::recv(peer.fd.get(), buffer, sizeof buffer, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) peer.hub_closed = true;
      }
      if (!peer.write_closed && !peer.outgoing.empty() && (fds[i].revents & POLLOUT)) {
        const ssize_t n = ::send(peer.fd.get(), peer.outgoing.data(), peer.outgoing.size(), MSG_NOSIGNAL);
        if (n > 0) peer.outgoing.erase(0, static_cast<std::size_t>(n));
        else if (n < 0 && errno != EAGAIN && errno != EINTR) peer.outgoing.clear();  // the hub dropped us
      }
    }
  }
  (void)hub.failure();
  return 0;
}
