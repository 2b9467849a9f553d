// tests/soak/soak.cpp — a bounded soak: random operations at random sizes on a host provider, for
// SOAK_SECONDS (default 120), every result checked against an expectation computed here from the
// same formula, never from the code under test.
//
//   aperture launch -n 8 -- build/tests/soak/soak_test [PROVIDER]      (shm by default)
//   SOAK_SECONDS=600 SOAK_SEED=7 aperture launch -n 8 -- ...
//
// Every rank derives the same schedule from SOAK_SEED (each step: an operation, its size, its
// peer shift, its type or reduction), so the collective calls match without any exchange; rank 0's
// clock alone decides, every 32 steps (a broadcast), whether to go on. Operations: put, get,
// store/load, every atomic (add, sub, and, or, xor, min, max, xchg, cas), a signal ring, and every
// collective of the collectives library (barrier, broadcast, all_gather, reduce_scatter,
// all_reduce with each algorithm, all_to_all) over int32, int64, float and double, sum/min/max.
// Allocations come and go too (a random-size allocation is freed and made again every 64 steps).
//
// At the end rank 0 prints `soak: ranks=N seconds=S steps=K operations=O bytes=B errors=E
// rss_kb=A->B mappings=M0->M1 descriptors=D0->D1` (the sums over every rank; memory: rank 0's, after
// the first 64 steps and at the end) and the program fails when any rank saw a wrong value or
// its mappings or descriptors grew.
#include <aperture/aperture.h>
#include <aperture/collectives/collectives.h>
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

using aperture::DataType;
using aperture::ReduceOp;

constexpr std::size_t kMaxCount = std::size_t{1} << 15;  // elements of one rank's slot (int64)

// What rank `r` writes for target `t` at element `i` in step `step`: distinct per rank, target,
// element and step, exact in double.
std::int64_t value(int r, int t, std::size_t i, std::uint64_t step) {
  return static_cast<std::int64_t>(((step % 100000) * 64 + static_cast<std::uint64_t>(r) * 8 + static_cast<std::uint64_t>(t)) << 16) +
         static_cast<std::int64_t>(i % 65536);
}
// Inputs of the collectives: small enough that sums over 8 ranks stay exact in float.
double small(int r, std::size_t i, std::uint64_t step) {
  return static_cast<double>((r + 1) * 1000 + static_cast<int>(i % 997) + static_cast<int>(step % 7));
}

struct Footprint {
  long rss_kb = 0;
  std::size_t mappings = 0;
  std::size_t descriptors = 0;
  static Footprint now() {
    Footprint f;
    std::ifstream statm("/proc/self/statm");
    long pages = 0, resident = 0;
    statm >> pages >> resident;
    f.rss_kb = resident * (::sysconf(_SC_PAGESIZE) / 1024);
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) ++f.mappings;
    if (DIR* dir = ::opendir("/proc/self/fd")) {
      while (const dirent* e = ::readdir(dir))
        if (e->d_name[0] != '.') ++f.descriptors;
      ::closedir(dir);
      --f.descriptors;
    }
    return f;
  }
};

class Soak {
 public:
  Soak(aperture::Team& team, aperture::Provider& provider, std::uint64_t seed)
      : team_(team), provider_(provider), me_(team.rank()), n_(team.size()), random_(seed) {
    slots_ = provider_.allocate(static_cast<std::size_t>(n_) * kMaxCount * sizeof(std::int64_t));
    src_ = provider_.allocate(kMaxCount * sizeof(std::int64_t));
    words_ = provider_.allocate(static_cast<std::size_t>(n_) * 16 * sizeof(std::int64_t));
    flags_ = provider_.allocate(static_cast<std::size_t>(n_) * sizeof(std::uint64_t));
    std::fill_n(flags_.as<std::uint64_t>(), n_, 0);
    comm_.emplace(provider_, team_);
    team_.barrier();
  }
  ~Soak() {
    comm_.reset();
    for (auto* a : {&churned_, &flags_, &words_, &src_, &slots_})
      if (a->ptr != nullptr) provider_.free(*a);
  }

  // One step of the schedule; every rank runs the same one.
  void step(std::uint64_t step) {
    step_ = step;
    const unsigned kind = static_cast<unsigned>(random_() % 12);
    const std::size_t count = 1 + static_cast<std::size_t>(random_() % (std::size_t{1} << (random_() % 16)));
    const int shift = n_ == 1 ? 0 : 1 + static_cast<int>(random_() % static_cast<unsigned>(n_ - 1));
    const unsigned variant = static_cast<unsigned>(random_());
    switch (kind) {
      case 0: put(count, shift); break;
      case 1: get(count, shift); break;
      case 2: store_load(std::min<std::size_t>(count, 4096), shift); break;
      case 3: case 4: atomics(variant, 1 + count % 64); break;
      case 5: ring(std::min<std::size_t>(count, kMaxCount)); break;
      default: collective(variant, std::min<std::size_t>(count, 8192)); break;
    }
    if (step % 64 == 63) churn(1 + static_cast<std::size_t>(random_() % (std::size_t{1} << 20)));
  }

  unsigned long long operations() const { return operations_; }
  unsigned long long bytes() const { return bytes_; }
  unsigned long long errors() const { return errors_; }

 private:
  void wrong(const char* what, std::size_t i, std::int64_t got, std::int64_t expected) {
    if (errors_ < 10)
      std::fprintf(stderr, "soak rank %d step %llu: %s element %zu: got %lld, expected %lld\n", me_,
                   static_cast<unsigned long long>(step_), what, i, static_cast<long long>(got),
                   static_cast<long long>(expected));
    ++errors_;
  }
  const std::int64_t* table(const aperture::Allocation& a) const { return a.map.peer_bases(); }

  // Each rank puts its values into slot [me] of rank (me + shift)'s slots; checks what rank
  // (me - shift) put into its own.
  void put(std::size_t count, int shift) {
    const int to = (me_ + shift) % n_, from = (me_ - shift + n_) % n_;
    auto* src = src_.as<std::int64_t>();
    for (std::size_t i = 0; i < count; ++i) src[i] = value(me_, to, i, step_);
    auto* slots = slots_.as<std::int64_t>();
    aperture::put(slots + static_cast<std::size_t>(me_) * kMaxCount, src, count, me_, to, table(slots_));
    team_.barrier();
    const std::int64_t* mine = slots + static_cast<std::size_t>(from) * kMaxCount;
    for (std::size_t i = 0; i < count; ++i)
      if (mine[i] != value(from, me_, i, step_)) wrong("put", i, mine[i], value(from, me_, i, step_));
    operations_ += 1;
    bytes_ += count * sizeof(std::int64_t);
    team_.barrier();  // src and slots are rewritten by the next step
  }

  void get(std::size_t count, int shift) {
    const int peer = (me_ + shift) % n_;
    auto* src = src_.as<std::int64_t>();
    for (std::size_t i = 0; i < count; ++i) src[i] = value(me_, me_, i, step_);
    team_.barrier();
    std::vector<std::int64_t> got(count);
    aperture::get(got.data(), src, count, me_, peer, table(src_));
    for (std::size_t i = 0; i < count; ++i)
      if (got[i] != value(peer, peer, i, step_)) wrong("get", i, got[i], value(peer, peer, i, step_));
    operations_ += 1;
    bytes_ += count * sizeof(std::int64_t);
    team_.barrier();
  }

  // Element by element: store into the peer's slot, then load back from it after a barrier.
  void store_load(std::size_t count, int shift) {
    const int to = (me_ + shift) % n_;
    auto* slots = slots_.as<std::int64_t>();
    std::int64_t* slot = slots + static_cast<std::size_t>(me_) * kMaxCount;
    for (std::size_t i = 0; i < count; ++i) aperture::store(slot + i, value(me_, to, i, step_) + 1, me_, to, table(slots_));
    team_.barrier();
    for (std::size_t i = 0; i < count; ++i) {
      const std::int64_t seen = aperture::load(slot + i, me_, to, table(slots_));
      if (seen != value(me_, to, i, step_) + 1) wrong("store/load", i, seen, value(me_, to, i, step_) + 1);
    }
    operations_ += 2 * count;
    bytes_ += 2 * count * sizeof(std::int64_t);
    team_.barrier();
  }

  // Word w of every rank's words, hit by every rank `reps` times with one atomic; the owner
  // checks the result against what the ranks' values give.
  void atomics(unsigned variant, std::size_t reps) {
    const unsigned op = variant % 9;
    auto* words = words_.as<std::int64_t>();
    const std::int64_t start = op == 2 ? -1 : (op == 5 ? (std::int64_t{1} << 40) : 0);  // and: all ones; min: high
    for (int w = 0; w < n_; ++w) words[w] = start;
    team_.barrier();
    std::vector<std::int64_t> returned;
    for (int t = 0; t < n_; ++t) {
      std::int64_t* word = words + me_;  // slot [me] of rank t's words (xchg/cas: slot 0, shared)
      for (std::size_t k = 0; k < reps; ++k) {
        const std::int64_t v = static_cast<std::int64_t>((me_ + 1) * 1000 + k);
        switch (op) {
          case 0: aperture::atomic_add(words, v, me_, t, table(words_)); break;
          case 1: aperture::atomic_sub(words, v, me_, t, table(words_)); break;
          case 2: aperture::atomic_and(word, ~(std::int64_t{1} << (k % 62)), me_, t, table(words_)); break;
          case 3: aperture::atomic_or(word, std::int64_t{1} << (k % 62), me_, t, table(words_)); break;
          case 4: aperture::atomic_xor(word, std::int64_t{1} << (k % 62), me_, t, table(words_)); break;
          case 5: aperture::atomic_min(words, v, me_, t, table(words_)); break;
          case 6: aperture::atomic_max(words, v, me_, t, table(words_)); break;
          case 7: returned.push_back(aperture::atomic_xchg(words, v + 1, me_, t, table(words_))); break;
          default: {  // an increment by compare-and-swap, retried until it lands
            std::int64_t seen = aperture::load(words, me_, t, table(words_));
            for (;;) {
              const std::int64_t old = aperture::atomic_cas(words, seen, seen + 1, me_, t, table(words_));
              if (old == seen) break;
              seen = old;
            }
          }
        }
      }
    }
    team_.barrier();
    // What my words must hold, from every rank's values.
    const auto r_sum = [&](auto f) {
      std::int64_t s = 0;
      for (int r = 0; r < n_; ++r)
        for (std::size_t k = 0; k < reps; ++k) s += f(r, k);
      return s;
    };
    const auto v = [](int r, std::size_t k) { return static_cast<std::int64_t>((r + 1) * 1000 + k); };
    if (op == 0 || op == 1) {
      const std::int64_t total = r_sum(v);
      const std::int64_t expected = op == 0 ? total : -total;
      if (words[0] != expected) wrong(op == 0 ? "atomic_add" : "atomic_sub", 0, words[0], expected);
    } else if (op >= 2 && op <= 4) {
      std::int64_t expected = start;
      for (std::size_t k = 0; k < reps; ++k) {
        const std::int64_t bit = std::int64_t{1} << (k % 62);
        expected = op == 2 ? (expected & ~bit) : op == 3 ? (expected | bit) : (expected ^ bit);
      }
      for (int w = 0; w < n_; ++w)  // slot w: rank w's bits, the same sequence for each
        if (words[w] != expected) wrong(op == 2 ? "atomic_and" : op == 3 ? "atomic_or" : "atomic_xor", w, words[w], expected);
    } else if (op == 5 || op == 6) {
      const std::int64_t expected = op == 5 ? v(0, 0) : v(n_ - 1, reps - 1);
      if (words[0] != expected) wrong(op == 5 ? "atomic_min" : "atomic_max", 0, words[0], expected);
    } else if (op == 7) {
      // Every value swapped in comes out exactly once: as some rank's returned value, or as the
      // final one; plus the start value. Rank t's returns of my word are what rank t gathers.
      std::vector<std::int64_t> all(static_cast<std::size_t>(n_) * n_ * reps);
      team_.allgather(returned.data(), all.data(), returned.size() * sizeof(std::int64_t));
      std::vector<std::int64_t> seen{words[0]};
      for (int r = 0; r < n_; ++r)  // rank r's returns, target me: entries [r][me][0..reps)
        for (std::size_t k = 0; k < reps; ++k)
          seen.push_back(all[(static_cast<std::size_t>(r) * n_ + me_) * reps + k]);
      std::vector<std::int64_t> expected{start};
      for (int r = 0; r < n_; ++r)
        for (std::size_t k = 0; k < reps; ++k) expected.push_back(v(r, k) + 1);
      std::sort(seen.begin(), seen.end());
      std::sort(expected.begin(), expected.end());
      for (std::size_t i = 0; i < expected.size(); ++i)
        if (seen[i] != expected[i]) {
          wrong("atomic_xchg (values out)", i, seen[i], expected[i]);
          break;
        }
    } else {
      const auto expected = static_cast<std::int64_t>(reps) * n_;
      if (words[0] != expected) wrong("atomic_cas", 0, words[0], expected);
    }
    operations_ += reps * static_cast<std::size_t>(n_);
    bytes_ += reps * static_cast<std::size_t>(n_) * sizeof(std::int64_t);
    team_.barrier();
  }

  // Put into the next rank, signal its flag; wait for mine and check the previous rank's data.
  void ring(std::size_t count) {
    const int next = (me_ + 1) % n_, previous = (me_ - 1 + n_) % n_;
    auto* src = src_.as<std::int64_t>();
    for (std::size_t i = 0; i < count; ++i) src[i] = value(me_, next, i, step_);
    auto* slots = slots_.as<std::int64_t>();
    aperture::put(slots + static_cast<std::size_t>(me_) * kMaxCount, src, count, me_, next, table(slots_));
    ++ring_round_;
    aperture::signal(flags_.as<std::uint64_t>() + me_, ring_round_, me_, next, table(flags_));
    aperture::wait_until_ge(flags_.as<std::uint64_t>() + previous, ring_round_);
    const std::int64_t* got = slots + static_cast<std::size_t>(previous) * kMaxCount;
    for (std::size_t i = 0; i < count; ++i)
      if (got[i] != value(previous, me_, i, step_)) wrong("signal ring", i, got[i], value(previous, me_, i, step_));
    operations_ += 2;
    bytes_ += count * sizeof(std::int64_t);
    team_.barrier();
  }

  template <class T>
  void check(const char* what, const std::vector<T>& got, const std::vector<double>& expected) {
    for (std::size_t i = 0; i < expected.size(); ++i)
      if (static_cast<double>(got[i]) != expected[i])
        wrong(what, i, static_cast<std::int64_t>(got[i]), static_cast<std::int64_t>(expected[i]));
  }

  static double reduce(ReduceOp op, double a, double b) {
    return op == ReduceOp::sum ? a + b : op == ReduceOp::min ? std::min(a, b) : std::max(a, b);
  }

  template <class T>
  void collective_of(DataType type, unsigned variant, std::size_t count) {
    const unsigned which = (variant >> 4) % 6;
    const auto op = static_cast<ReduceOp>((variant >> 8) % 3);
    const int root = static_cast<int>((variant >> 12) % static_cast<unsigned>(n_));
    const std::size_t n = static_cast<std::size_t>(n_);
    auto input = [&](int r, std::size_t len) {
      std::vector<T> in(len);
      for (std::size_t i = 0; i < len; ++i) in[i] = static_cast<T>(small(r, i, step_));
      return in;
    };
    std::vector<double> expected;
    std::size_t moved = count;
    switch (which) {
      case 0: {
        comm_->barrier();
        break;
      }
      case 1: {
        std::vector<T> buf = input(me_, count), out(count);
        comm_->broadcast(buf.data(), out.data(), count, root);
        for (std::size_t i = 0; i < count; ++i) expected.push_back(small(root, i, step_));
        check("broadcast", out, expected);
        break;
      }
      case 2: {
        std::vector<T> in = input(me_, count), out(n * count);
        comm_->all_gather(in.data(), out.data(), count);
        for (int r = 0; r < n_; ++r)
          for (std::size_t i = 0; i < count; ++i) expected.push_back(small(r, i, step_));
        check("all_gather", out, expected);
        moved = n * count;
        break;
      }
      case 3: {
        std::vector<T> in = input(me_, n * count), out(count);
        comm_->reduce_scatter(in.data(), out.data(), count, op);
        for (std::size_t i = 0; i < count; ++i) {
          double e = small(0, static_cast<std::size_t>(me_) * count + i, step_);
          for (int r = 1; r < n_; ++r) e = reduce(op, e, small(r, static_cast<std::size_t>(me_) * count + i, step_));
          expected.push_back(e);
        }
        check("reduce_scatter", out, expected);
        moved = n * count;
        break;
      }
      case 4: {
        const auto algorithm = static_cast<aperture::AllReduceAlgorithm>((variant >> 16) % 4);
        std::vector<T> in = input(me_, count), out(count);
        comm_->all_reduce(in.data(), out.data(), count, op, algorithm);
        for (std::size_t i = 0; i < count; ++i) {
          double e = small(0, i, step_);
          for (int r = 1; r < n_; ++r) e = reduce(op, e, small(r, i, step_));
          expected.push_back(e);
        }
        check("all_reduce", out, expected);
        break;
      }
      default: {
        std::vector<T> in = input(me_, n * count), out(n * count);
        comm_->all_to_all(in.data(), out.data(), count);
        for (int r = 0; r < n_; ++r)
          for (std::size_t i = 0; i < count; ++i) expected.push_back(small(r, static_cast<std::size_t>(me_) * count + i, step_));
        check("all_to_all", out, expected);
        moved = n * count;
        break;
      }
    }
    (void)type;
    operations_ += 1;
    bytes_ += moved * sizeof(T);
  }

  void collective(unsigned variant, std::size_t count) {
    switch (variant % 4) {
      case 0: collective_of<std::int32_t>(DataType::int32, variant, count); break;
      case 1: collective_of<std::int64_t>(DataType::int64, variant, count); break;
      case 2: collective_of<float>(DataType::float32, variant, count); break;
      default: collective_of<double>(DataType::float64, variant, count); break;
    }
  }

  // An allocation of a new random size replaces the last one; written by its owner and read by
  // the next rank through its table.
  void churn(std::size_t bytes) {
    if (churned_.ptr != nullptr) {
      team_.barrier();
      provider_.free(churned_);
    }
    churned_ = provider_.allocate(bytes);
    const std::size_t count = bytes / sizeof(std::int64_t);
    auto* data = churned_.as<std::int64_t>();
    for (std::size_t i = 0; i < count; ++i) data[i] = value(me_, me_, i, step_);
    team_.barrier();
    const int next = (me_ + 1) % n_;
    for (std::size_t i = 0; i < count; i += 1 + i / 8) {  // a sample spread over the whole allocation
      const std::int64_t seen = aperture::load(data + i, me_, next, table(churned_));
      if (seen != value(next, next, i, step_)) wrong("churned allocation", i, seen, value(next, next, i, step_));
    }
    operations_ += 2;
    bytes_ += bytes;
  }

  aperture::Team& team_;
  aperture::Provider& provider_;
  const int me_, n_;
  std::mt19937_64 random_;
  aperture::Allocation slots_, src_, words_, flags_, churned_;
  std::optional<aperture::Communicator> comm_;
  std::uint64_t step_ = 0;
  std::uint64_t ring_round_ = 0;
  unsigned long long operations_ = 0, bytes_ = 0, errors_ = 0;
};

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::strtoull(text, nullptr, 10) : fallback;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string provider_name = argc > 1 ? argv[1] : "shm";
  const std::uint64_t seconds = env_number("SOAK_SECONDS", 120);
  const std::uint64_t seed = env_number("SOAK_SEED", 1);
  aperture::Team team = aperture::Team::from_env();
  auto provider = aperture::make_provider(provider_name, team);
  if (provider->memory_kind() != aperture::MemoryKind::host) {
    std::fprintf(stderr, "soak runs on the CPU; provider '%s' hands out GPU memory\n", provider_name.c_str());
    return 2;
  }
  const auto started = std::chrono::steady_clock::now();
  Footprint first, last;
  unsigned long long totals[3] = {0, 0, 0};
  std::uint64_t steps = 0;
  {
    Soak soak(team, *provider, seed);
    for (std::uint8_t go = 1; go != 0; ++steps) {
      soak.step(steps);
      if (steps == 63) first = Footprint::now();
      if (steps % 32 == 31) {
        // Rank 0's clock decides for everyone, so every rank runs the same number of steps.
        go = std::chrono::steady_clock::now() - started < std::chrono::seconds(seconds) ? 1 : 0;
        team.broadcast(&go, sizeof go, 0);
        if (team.rank() == 0 && steps % 4096 == 4095)
          std::printf("soak: %llu steps, %llu operations (rank 0), %llu errors so far\n",
                      static_cast<unsigned long long>(steps + 1), soak.operations(), soak.errors());
        if (team.rank() == 0) std::fflush(stdout);  // a pipe to the launcher: show progress as it comes
      }
    }
    const unsigned long long mine[3] = {soak.operations(), soak.bytes(), soak.errors()};
    std::vector<unsigned long long> all(3 * static_cast<std::size_t>(team.size()));
    team.allgather(mine, all.data(), sizeof mine);
    for (int r = 0; r < team.size(); ++r)
      for (int k = 0; k < 3; ++k) totals[k] += all[3 * static_cast<std::size_t>(r) + k];
  }
  team.barrier();
  last = Footprint::now();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // Memory flat: the provider's allocations are freed; what the first steps mapped is back.
  const bool grew = last.mappings > first.mappings || last.descriptors > first.descriptors;
  if (team.rank() == 0)
    std::printf("soak: provider=%s ranks=%d seed=%llu seconds=%.0f steps=%llu operations=%llu bytes=%llu errors=%llu "
                "rss_kb=%ld->%ld mappings=%zu->%zu descriptors=%zu->%zu%s\n",
                provider_name.c_str(), team.size(), static_cast<unsigned long long>(seed), elapsed,
                static_cast<unsigned long long>(steps), totals[0], totals[1], totals[2], first.rss_kb, last.rss_kb,
                first.mappings, last.mappings, first.descriptors, last.descriptors,
                grew ? " (GREW)" : "");
  return totals[2] == 0 && !grew ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "soak: %s\n", e.what());
  return 1;
}
