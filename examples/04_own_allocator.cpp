// examples/04_own_allocator.cpp — memory aperture did not allocate, described by its table.
//
//   aperture launch -n 4 -- build/examples/example_04_own_allocator
//
// Here the "allocator" is the program itself: every rank creates one POSIX shared-memory
// segment, every rank maps every segment, and the table of where each landed is all aperture
// needs. SymmetricAddressMap::from_table() checks the table and turns it into the same map a
// provider would hand out, so the operations of examples 01-03 run on it unchanged:
//   - store + signal: each rank writes into its right neighbour's segment, then signals it;
//   - get: each rank reads back, from its left neighbour, what that neighbour received;
//   - atomic_add: every rank adds into a counter on every rank.
// Each rank checks every value it owns. The segments are unlinked as soon as every rank has
// mapped them, so nothing stays in /dev/shm, even if a rank dies later; the program checks that.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include <aperture/aperture.h>

namespace {

constexpr int kCount = 4096;

// One rank's segment: the flag, the data its left neighbour stores, what it got back from its
// right neighbour, and a counter every rank adds to.
struct Segment {
  std::uint64_t arrived;
  std::int64_t counter;
  std::int32_t received[kCount];
  std::int32_t echoed[kCount];
};

std::int32_t value_from(int rank, int i) { return rank * 100000 + i; }

[[noreturn]] void fail(const std::string& what) { throw std::system_error(errno, std::generic_category(), what); }

// The segment name of `rank` in this job: the job's nonce keeps concurrent jobs apart.
std::string segment_name(std::uint64_t nonce, int rank) {
  return "/aperture-example-04-" + std::to_string(nonce) + "-" + std::to_string(rank);
}

// Removes this rank's segment name when the program leaves early through an exception (a peer
// failed, the Team gave up); on the normal path the name is removed as soon as it is mapped.
struct NameGuard {
  std::string name;
  ~NameGuard() {
    if (!name.empty()) shm_unlink(name.c_str());
  }
};

// Maps one segment of `bytes` bytes; creates it (0600: private to this user) when `create`.
void* map_segment(const std::string& name, std::size_t bytes, bool create) {
  const int fd = create ? shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600) : shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) fail("shm_open(" + name + ")");
  void* p = MAP_FAILED;
  if (!create || ftruncate(fd, static_cast<off_t>(bytes)) == 0)
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  close(fd);  // the mapping keeps the segment alive
  if (p == MAP_FAILED) {
    if (create) shm_unlink(name.c_str());  // made here, so removed here
    errno = error;
    fail("ftruncate/mmap(" + name + ")");
  }
  return p;
}

}  // namespace

int main() try {
  aperture::Team team = aperture::Team::from_env();
  const int me = team.rank();
  const int n = team.size();
  const int right = (me + 1) % n;
  const int left = (me + n - 1) % n;
  const std::size_t bytes = sizeof(Segment);

  // Rank 0 picks a nonce for the names; every rank creates its own segment.
  std::uint64_t nonce = 0;
  if (me == 0) nonce = std::random_device{}() ^ (std::uint64_t(getpid()) << 32);
  team.broadcast(&nonce, sizeof nonce, 0);
  std::vector<void*> mapped(n);
  NameGuard guard;
  mapped[me] = map_segment(segment_name(nonce, me), bytes, /*create=*/true);
  guard.name = segment_name(nonce, me);
  team.barrier();  // every segment exists

  // Every rank maps every peer's segment; then the names go, and only the mappings remain.
  for (int r = 0; r < n; ++r)
    if (r != me) mapped[r] = map_segment(segment_name(nonce, r), bytes, /*create=*/false);
  team.barrier();  // every rank has mapped every segment
  if (shm_unlink(guard.name.c_str()) != 0) fail("shm_unlink");
  guard.name.clear();

  // The table: where each rank's segment lies in this process. That is the whole contract.
  std::vector<std::int64_t> table(n);
  for (int r = 0; r < n; ++r) table[r] = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(mapped[r]));
  const aperture::SymmetricAddressMap map = aperture::SymmetricAddressMap::from_table("example-04", me, table, bytes);
  const aperture::PeerView peers = map.peer_view();  // what a kernel would take

  auto* mine = static_cast<Segment*>(mapped[me]);  // fresh segments are zero-filled
  team.barrier();

  // store + signal into the right neighbour, wait for the left one.
  for (int i = 0; i < kCount; ++i) peers.store(&mine->received[i], value_from(me, i), right);
  peers.signal(&mine->arrived, 1, right);
  aperture::wait_until_ge(&mine->arrived, 1);
  team.barrier();  // every rank has received

  // get: what the left neighbour received (it came from left's left), read out of its segment.
  peers.get(mine->echoed, mine->received, kCount, left);
  // atomic_add into every rank's counter, this rank's amount (rank + 1).
  for (int r = 0; r < n; ++r) peers.atomic_add(&mine->counter, std::int64_t{me} + 1, r);
  team.barrier();  // every addition has landed

  long long wrong = 0;
  const int left_of_left = (left + n - 1) % n;
  for (int i = 0; i < kCount; ++i) {
    if (mine->received[i] != value_from(left, i) && wrong++ == 0)
      std::fprintf(stderr, "rank %d: received[%d] = %d, expected %d\n", me, i, mine->received[i], value_from(left, i));
    if (mine->echoed[i] != value_from(left_of_left, i) && wrong++ == 0)
      std::fprintf(stderr, "rank %d: echoed[%d] = %d, expected %d\n", me, i, mine->echoed[i],
                   value_from(left_of_left, i));
  }
  const std::int64_t expected_counter = std::int64_t(n) * (n + 1) / 2;
  if (mine->counter != expected_counter) {
    ++wrong;
    std::fprintf(stderr, "rank %d: counter = %lld, expected %lld\n", me, static_cast<long long>(mine->counter),
                 static_cast<long long>(expected_counter));
  }
  // Nothing left behind: this rank's name is gone from /dev/shm.
  const int stale = shm_open(segment_name(nonce, me).c_str(), O_RDONLY, 0);
  if (stale >= 0 || errno != ENOENT) {
    ++wrong;
    std::fprintf(stderr, "rank %d: segment %s still exists after shm_unlink\n", me, segment_name(nonce, me).c_str());
    if (stale >= 0) close(stale);
  }
  std::printf("rank %d/%d (own allocator): %d values from rank %d, %d read back from rank %d, counter %lld: %s\n",
              me, n, kCount, left, kCount, left, static_cast<long long>(mine->counter), wrong ? "WRONG" : "ok");

  team.barrier();  // nobody unmaps while a peer may still read its segment
  for (void* p : mapped) munmap(p, bytes);
  return wrong ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "example_04_own_allocator: %s\n", e.what());
  return 1;
}
