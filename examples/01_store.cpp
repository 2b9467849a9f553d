// examples/01_store.cpp — every rank writes into its right neighbour's memory, then tells it so.
//
//   aperture launch -n 4 -- build/examples/example_01_store [PROVIDER]
//
// Rank r stores values that only rank r would write into rank (r+1)'s copy of a symmetric
// buffer, signals rank (r+1)'s flag, and waits on its own flag until its left neighbour has done
// the same to it. A wrong peer or offset would show as a wrong value.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include <aperture/aperture.h>

namespace {

constexpr int kCount = 1024;

// One symmetric allocation holds the data and the flag that says it has arrived. Keeping both
// in one allocation means one table describes both, whatever the provider.
struct Mailbox {
  std::uint64_t arrived;
  std::int32_t data[kCount];
};

std::int32_t value_from(int rank, int i) { return rank * 100000 + i; }

}  // namespace

int main(int argc, char** argv) try {
  const std::string provider_name = argc > 1 ? argv[1] : "shm";
  aperture::Team team = aperture::Team::from_env();  // must outlive the provider
  auto provider = aperture::make_provider(provider_name, team);
  if (provider->memory_kind() != aperture::MemoryKind::host) {
    std::fprintf(stderr, "example_01_store runs on the CPU; provider '%s' hands out GPU memory\n",
                 provider_name.c_str());
    return 2;
  }

  const int me = team.rank();
  const int right = (me + 1) % team.size();
  const int left = (me + team.size() - 1) % team.size();

  aperture::Allocation allocation = provider->allocate(sizeof(Mailbox));  // collective
  auto* mine = allocation.as<Mailbox>();
  const std::int64_t* peer_bases = allocation.map.peer_bases();
  mine->arrived = 0;
  team.barrier();  // every flag is 0 before anyone signals

  // The same loop body would run in a CUDA kernel over GPU memory (one element per thread).
  for (int i = 0; i < kCount; ++i) aperture::store(&mine->data[i], value_from(me, i), me, right, peer_bases);
  aperture::signal(&mine->arrived, 1, me, right, peer_bases);  // release: the stores above land first
  aperture::wait_until_ge(&mine->arrived, 1);                  // acquire: the left neighbour's stores are visible

  int wrong = 0;
  for (int i = 0; i < kCount; ++i) {
    if (mine->data[i] != value_from(left, i)) {
      if (wrong++ == 0)
        std::fprintf(stderr, "rank %d: data[%d] = %d, expected %d (from rank %d)\n", me, i, mine->data[i],
                     value_from(left, i), left);
    }
  }
  std::printf("rank %d/%d (%s): received %d values from rank %d: %s\n", me, team.size(),
              std::string(provider->name()).c_str(), kCount, left, wrong ? "WRONG" : "ok");

  provider->free(allocation);  // collective: nobody frees before everyone has checked
  return wrong ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "example_01_store: %s\n", e.what());
  return 1;
}
