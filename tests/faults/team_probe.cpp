// team_probe [PROVIDER]: forms the Team from the environment, and with PROVIDER also makes that
// provider, allocates and frees; prints "probe ok: rank R of N" and exits 0, or
// "probe error: <message>" and exits 3 on an aperture::Error (4 on any other exception).
// tests/faults/env_misuse.sh starts it with malformed environments. SIGTERM is blocked so that
// under `aperture launch`, which stops the other ranks when one fails, every rank still reports.
#include <aperture/aperture.h>

#include <signal.h>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    auto team = aperture::Team::from_env();
    if (argc > 1) {
      auto provider = aperture::make_provider(argv[1], team);
      aperture::Allocation a = provider->allocate(64);
      team.barrier();
      provider->free(a);
    }
    std::printf("probe ok: rank %d of %d\n", team.rank(), team.size());
    return 0;
  } catch (const aperture::Error& e) {
    std::printf("probe error: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::printf("probe error (not an aperture::Error): %s\n", e.what());
    return 4;
  }
}
