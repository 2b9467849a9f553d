// job_probe DIR: a job for tests/security/security_test.sh to attack. Each rank forms the Team,
// makes the shm provider, fills an allocation with its own pattern, and writes DIR/rank.R with
// "PID MEMFD HUB" (its pid, the descriptor of its heap's memfd, the hub address). It then waits
// for DIR/release (at most 120 s), and checks that the job is intact: a barrier, its own pattern
// and every peer's through the table. Prints "job-probe ok (rank R)" and exits 0, or exits 1.
#include <aperture/aperture.h>

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace {

// The descriptor of the shm heap: a link to "/memfd:aperture-shm-heap (deleted)".
int heap_memfd() {
  DIR* dir = ::opendir("/proc/self/fd");
  int found = -1;
  while (dirent* entry = dir ? ::readdir(dir) : nullptr) {
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    if (::readlink(link.c_str(), target, sizeof target - 1) > 0 &&
        std::string(target).find("memfd:aperture-shm-heap") != std::string::npos)
      found = std::atoi(entry->d_name);
  }
  if (dir) ::closedir(dir);
  return found;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: job_probe DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  try {
    auto team = aperture::Team::from_env();
    auto provider = aperture::make_provider("shm", team);
    aperture::Allocation a = provider->allocate(4096 * sizeof(std::uint64_t));
    const int me = team.rank(), n = team.size();
    auto pattern = [](int rank, std::size_t i) { return 0x5EC0000000000000ull + rank * 100000ull + i; };
    for (std::size_t i = 0; i < 4096; ++i) a.as<std::uint64_t>()[i] = pattern(me, i);
    team.barrier();
    const char* hub = std::getenv("APERTURE_HUB");
    std::ofstream(dir + "/rank." + std::to_string(me) + ".tmp")
        << ::getpid() << ' ' << heap_memfd() << ' ' << (hub ? hub : "-") << '\n';
    std::rename((dir + "/rank." + std::to_string(me) + ".tmp").c_str(), (dir + "/rank." + std::to_string(me)).c_str());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (::access((dir + "/release").c_str(), F_OK) != 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::printf("job-probe FAILED (rank %d): never released\n", me);
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    team.barrier();
    std::size_t wrong = 0;
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < 4096; ++i)
        wrong += aperture::load(a.as<std::uint64_t>() + i, me, r, a.map.peer_bases()) != pattern(r, i);
    team.barrier();
    provider->free(a);
    if (wrong != 0) {
      std::printf("job-probe FAILED (rank %d): %zu words changed\n", me, wrong);
      return 1;
    }
    std::printf("job-probe ok (rank %d)\n", me);
    return 0;
  } catch (const aperture::Error& e) {
    std::printf("job-probe FAILED: %s\n", e.what());
    return 1;
  }
}
