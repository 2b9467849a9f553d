// mpi_providers_smoke — what only the MPI-owned providers have, under `mpirun -n N`:
//
//   mpi_providers_smoke                 run the checks below; exit 0 when all hold, 1 otherwise
//   mpi_providers_smoke exit-status S   use both providers, then the last rank returns S and the
//                                       others 0: mpirun must exit with S (not 0, not 139), which
//                                       proves OpenSHMEM's finalize at exit neither crashes nor
//                                       hides a failing rank
//
// Checks (values differ per rank and per element, so a wrong peer or offset shows):
//   - mpi-window with an alignment above the page size: each rank aligns its own segment, and
//     every element of every direct peer's copy is read through the table and written back;
//   - mpi-window and openshmem allocations of 0 bytes have distinct addresses;
//   - openshmem describes memory the program got from shmem_malloc itself, and its table is the
//     one shmem_ptr gives.
#include <aperture/aperture.h>
#include <shmem.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int failures = 0;

#define SMOKE_CHECK(condition, ...)                                                                    \
  do {                                                                                                 \
    if (!(condition)) {                                                                                \
      ++failures;                                                                                      \
      std::fprintf(stderr, "rank %d: check failed at line %d: %s: ", rank, __LINE__, #condition);      \
      std::fprintf(stderr, __VA_ARGS__);                                                               \
      std::fputc('\n', stderr);                                                                        \
    }                                                                                                  \
  } while (0)

std::uint64_t pattern(int rank, std::size_t i, int salt) {
  return (static_cast<std::uint64_t>(rank + 1) << 40) | (static_cast<std::uint64_t>(salt) << 32) | i;
}

// Every rank fills its copy; every rank reads every direct peer's copy element by element, then
// adds its own rank bit into the next rank's copy; the owner checks what arrived.
void exercise(aperture::Team& team, aperture::Provider& provider, std::size_t count, std::size_t alignment, int salt) {
  const int rank = team.rank();
  const int n = team.size();
  aperture::Allocation a = provider.allocate(count * sizeof(std::uint64_t), alignment);
  auto* data = a.as<std::uint64_t>();
  SMOKE_CHECK(reinterpret_cast<std::uintptr_t>(a.ptr) % alignment == 0, "%s: %p is not %zu-aligned",
              std::string(provider.name()).c_str(), a.ptr, alignment);
  for (std::size_t i = 0; i < count; ++i) data[i] = pattern(rank, i, salt);
  team.barrier();
  for (int peer = 0; peer < n; ++peer) {
    if (!a.map.is_direct(peer)) continue;
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < count; ++i)
      wrong += aperture::load(data + i, rank, peer, a.map.peer_bases()) != pattern(peer, i, salt);
    SMOKE_CHECK(wrong == 0, "%s: %zu of %zu elements of rank %d's copy are wrong", std::string(provider.name()).c_str(),
                wrong, count, peer);
  }
  team.barrier();
  const int next = (rank + 1) % n;
  if (a.map.is_direct(next))
    for (std::size_t i = 0; i < count; ++i)
      aperture::store(data + i, pattern(next, i, salt) ^ (std::uint64_t{1} << 63), rank, next, a.map.peer_bases());
  team.barrier();
  const int prev = (rank + n - 1) % n;
  if (a.map.is_direct(prev) || prev == rank) {  // whoever could reach us has written
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < count; ++i) wrong += data[i] != (pattern(rank, i, salt) ^ (std::uint64_t{1} << 63));
    SMOKE_CHECK(wrong == 0, "%s: %zu of %zu elements rank %d stored here are wrong",
                std::string(provider.name()).c_str(), wrong, count, prev);
  }
  team.barrier();
  provider.free(a);
}

void zero_bytes_are_distinct(aperture::Team& team, aperture::Provider& provider) {
  const int rank = team.rank();
  aperture::Allocation first = provider.allocate(0);
  aperture::Allocation second = provider.allocate(0);
  SMOKE_CHECK(first.ptr != nullptr && second.ptr != nullptr && first.ptr != second.ptr,
              "%s: empty allocations at %p and %p", std::string(provider.name()).c_str(), first.ptr, second.ptr);
  SMOKE_CHECK(first.bytes == 0 && first.map.owns(first.ptr, 0), "%s: an empty allocation is not described",
              std::string(provider.name()).c_str());
  provider.free(second);
  provider.free(first);
}

void describes_the_programs_own_shmem_malloc(aperture::Team& team, aperture::Provider& openshmem) {
  const int rank = team.rank();
  constexpr std::size_t kCount = 512;
  auto* own = static_cast<std::uint64_t*>(shmem_malloc(kCount * sizeof(std::uint64_t)));
  const auto map = openshmem.symmetric_address_map(own + 10, 100 * sizeof(std::uint64_t));
  for (int peer = 0; peer < team.size(); ++peer)
    SMOKE_CHECK(map.host_peer_bases()[peer] == reinterpret_cast<std::int64_t>(shmem_ptr(own + 10, peer)),
                "the table entry for rank %d is not shmem_ptr's", peer);
  for (std::size_t i = 0; i < kCount; ++i) own[i] = pattern(rank, i, 7);
  shmem_barrier_all();
  const int next = (rank + 1) % team.size();
  if (map.is_direct(next)) {
    std::size_t wrong = 0;
    for (std::size_t k = 0; k < 100; ++k)
      wrong += aperture::load(own + 10 + k, rank, next, map.peer_bases()) != pattern(next, 10 + k, 7);
    SMOKE_CHECK(wrong == 0, "%zu elements of rank %d's shmem_malloc buffer read wrong through the view", wrong, next);
  }
  shmem_barrier_all();
  shmem_free(own);
}

}  // namespace

int run(int argc, char** argv) {
  aperture::Team team = aperture::Team::from_env();
  const int rank = team.rank();
  auto window = aperture::make_provider("mpi-window", team);
  auto openshmem = aperture::make_provider("openshmem", team);

  if (argc == 3 && std::strcmp(argv[1], "exit-status") == 0) {
    exercise(team, *window, 1000, 64, 1);
    exercise(team, *openshmem, 1000, 64, 2);
    team.barrier();
    return rank == team.size() - 1 ? std::atoi(argv[2]) : 0;
  }

  exercise(team, *window, 5000, std::size_t{2} << 20, 3);  // above the page size: per-rank offsets
  exercise(team, *window, 333, 8, 4);
  exercise(team, *openshmem, 5000, 4096, 5);
  zero_bytes_are_distinct(team, *window);
  zero_bytes_are_distinct(team, *openshmem);
  describes_the_programs_own_shmem_malloc(team, *openshmem);

  team.barrier();
  if (failures == 0) std::printf("rank %d of %d: mpi providers smoke ok\n", rank, team.size());
  return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const aperture::Error& e) {
    std::fprintf(stderr, "mpi_providers_smoke: %s\n", e.what());
    return 1;
  }
}
