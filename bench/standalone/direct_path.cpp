// bench/standalone/direct_path.cpp — what a PeerView's engine branch costs a direct peer on the
// host: the same loops through the raw-table operations (aperture::store/put/atomic_add with a
// table, no engine branch) and through a PeerView with no engine attached (one compare of the
// table entry and a branch not taken), the "peer" being this process's own buffer. Prints the
// best of 40 runs of each; run it alone on a quiet machine.
//
//     c++ -O2 -std=c++20 -Iinclude bench/standalone/direct_path.cpp -o direct_path && ./direct_path
#include <aperture/peer_view.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace {

constexpr std::size_t kCount = std::size_t{1} << 20;

__attribute__((noinline)) void view_stores(aperture::PeerView v, std::int64_t* buf, int to) {
  for (std::size_t i = 0; i < kCount; ++i) v.store(&buf[i], std::int64_t(i), to);
}
__attribute__((noinline)) void raw_stores(int me, const std::int64_t* table, std::int64_t* buf, int to) {
  for (std::size_t i = 0; i < kCount; ++i) aperture::store(&buf[i], std::int64_t(i), me, to, table);
}
__attribute__((noinline)) void view_puts(aperture::PeerView v, std::int64_t* dst, const std::int64_t* src, int to) {
  for (std::size_t i = 0; i < kCount; i += 8) v.put(&dst[i], &src[i], 8, to);
}
__attribute__((noinline)) void raw_puts(int me, const std::int64_t* table, std::int64_t* dst, const std::int64_t* src,
                                        int to) {
  for (std::size_t i = 0; i < kCount; i += 8) aperture::put(&dst[i], &src[i], 8, me, to, table);
}
__attribute__((noinline)) std::int64_t view_adds(aperture::PeerView v, std::int64_t* buf, int to) {
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < kCount / 4; ++i) sum += v.atomic_add(&buf[i & 1023], std::int64_t(1), to);
  return sum;
}
__attribute__((noinline)) std::int64_t raw_adds(int me, const std::int64_t* table, std::int64_t* buf, int to) {
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < kCount / 4; ++i) sum += aperture::atomic_add(&buf[i & 1023], std::int64_t(1), me, to, table);
  return sum;
}

template <class F>
double best_us(F&& f) {
  double best = 1e30;
  for (int rep = 0; rep < 40; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main() {
  std::vector<std::int64_t> a(kCount), b(kCount, 3);
  const std::int64_t table[2] = {reinterpret_cast<std::int64_t>(a.data()), reinterpret_cast<std::int64_t>(a.data())};
  aperture::PeerView v;
  v.rank = 0;
  v.world_size = 2;
  v.peer_bases = table;
  v.extent = kCount * sizeof(std::int64_t);
  std::int64_t sink = 0;
  const double rs = best_us([&] { raw_stores(0, table, a.data(), 1); });
  const double vs = best_us([&] { view_stores(v, a.data(), 1); });
  const double rp = best_us([&] { raw_puts(0, table, a.data(), b.data(), 1); });
  const double vp = best_us([&] { view_puts(v, a.data(), b.data(), 1); });
  const double ra = best_us([&] { sink += raw_adds(0, table, a.data(), 1); });
  const double va = best_us([&] { sink += view_adds(v, a.data(), 1); });
  std::printf("op          raw table us   PeerView us   ratio\n");
  std::printf("store x1M   %12.1f  %12.1f  %6.3f\n", rs, vs, vs / rs);
  std::printf("put 8 x128K %12.1f  %12.1f  %6.3f\n", rp, vp, vp / rp);
  std::printf("add x256K   %12.1f  %12.1f  %6.3f\n", ra, va, va / ra);
  return sink == 42 ? 1 : 0;  // keeps the adds
}
