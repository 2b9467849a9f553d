// examples/02_signal_ring.cpp — a message travels round the ring of ranks, several times.
//
//   aperture launch -n 4 -- build/examples/example_02_signal_ring [PROVIDER]
//
// Rank 0 starts a message; every rank waits for it, adds its own mark, and put()s it into the
// next rank's inbox, then signal()s that rank with the lap number. Flags only grow (lap 1, 2,
// ...), so one flag serves every lap without being reset. After the last lap rank 0 checks
// that every rank left its mark on every lap.
//
// pass_on() is written against PeerView, the value a CUDA kernel would take: the same function
// runs in a kernel over GPU memory.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include <aperture/aperture.h>

namespace {

constexpr int kLaps = 3;
constexpr int kMaxRanks = 64;

struct Message {
  std::int64_t marks[kMaxRanks];  // marks[r]: what rank r added, summed over laps
  std::int64_t laps_seen;
};

struct Inbox {
  std::uint64_t lap;  // the lap whose message sits in `message`
  Message message;
};

std::int64_t mark_of(int rank, int lap) { return (rank + 1) * 1000 + lap; }

// Copies `outgoing` into the next rank's inbox and tells it which lap it is.
APERTURE_HD void pass_on(const aperture::PeerView& peers, Inbox* inbox, const Message* outgoing, int lap) {
  const int next = (peers.rank + 1) % peers.world_size;
  peers.put(&inbox->message, outgoing, 1, next);
  peers.signal(&inbox->lap, static_cast<std::uint64_t>(lap), next);
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string provider_name = argc > 1 ? argv[1] : "shm";
  aperture::Team team = aperture::Team::from_env();
  if (team.size() > kMaxRanks) {
    std::fprintf(stderr, "example_02_signal_ring handles up to %d ranks\n", kMaxRanks);
    return 2;
  }
  auto provider = aperture::make_provider(provider_name, team);
  if (provider->memory_kind() != aperture::MemoryKind::host) {
    std::fprintf(stderr, "example_02_signal_ring runs on the CPU; provider '%s' hands out GPU memory\n",
                 provider_name.c_str());
    return 2;
  }

  const int me = team.rank();
  // The inbox lives in symmetric memory; `outgoing` is private memory of this rank, and put()
  // reads it locally. Both must be given in this rank's address space.
  aperture::Allocation allocation = provider->allocate(sizeof(Inbox));
  auto* inbox = allocation.as<Inbox>();
  inbox->lap = 0;
  team.barrier();
  const aperture::PeerView peers = allocation.map.peer_view();

  Message outgoing{};
  for (int lap = 1; lap <= kLaps; ++lap) {
    if (me == 0) {
      if (lap > 1) {  // the previous lap's message came back round
        aperture::wait_until_ge(&inbox->lap, static_cast<std::uint64_t>(lap - 1));
        outgoing = inbox->message;
      }
    } else {
      aperture::wait_until_ge(&inbox->lap, static_cast<std::uint64_t>(lap));
      outgoing = inbox->message;
    }
    outgoing.marks[me] += mark_of(me, lap);
    if (me == 0) outgoing.laps_seen += 1;
    pass_on(peers, inbox, &outgoing, lap);
  }

  int rc = 0;
  if (me == 0) {
    aperture::wait_until_ge(&inbox->lap, static_cast<std::uint64_t>(kLaps));
    const Message& final_message = inbox->message;
    for (int r = 0; r < team.size(); ++r) {
      std::int64_t expected = 0;
      for (int lap = 1; lap <= kLaps; ++lap) expected += mark_of(r, lap);
      if (final_message.marks[r] != expected) {
        std::fprintf(stderr, "rank 0: mark of rank %d is %lld, expected %lld\n", r,
                     static_cast<long long>(final_message.marks[r]), static_cast<long long>(expected));
        rc = 1;
      }
    }
    if (final_message.laps_seen != kLaps) rc = 1;
    std::printf("rank 0: the message went round %d ranks %lld times (%s): %s\n", team.size(),
                static_cast<long long>(final_message.laps_seen), std::string(provider->name()).c_str(),
                rc ? "WRONG" : "ok");
  }

  provider->free(allocation);
  return rc;
} catch (const std::exception& e) {
  std::fprintf(stderr, "example_02_signal_ring: %s\n", e.what());
  return 1;
}
