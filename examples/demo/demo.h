// examples/demo/demo.h — one rank of the demo: its options, where each piece lies in the one
// symmetric allocation, and what it reports to rank 0.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>

#include "demo_algorithm.h"

namespace aperture::demo {

struct DemoOptions {
  std::string provider = "default";
  std::size_t bytes = std::size_t{1} << 20;  // per rank
  int expected_ranks = 0;                    // -n: the ranks asked for (0: any); a note when the job differs
};

inline constexpr std::size_t kDemoMaxBytes = std::size_t{1} << 30;

// One rank's part; returns its exit code.
int run_demo_worker(const DemoOptions& options);

// Where each piece of the demo lies inside one symmetric allocation of `total_bytes()`.
struct DemoLayout {
  DemoLayout(std::uint64_t count, int world);
  std::size_t total_bytes() const { return total_; }
  demo::Buffers buffers(void* base) const;

 private:
  std::uint64_t count_;
  int world_;
  std::uint64_t max_chunk_;
  std::size_t flags_ = 0, send_ = 0, ring0_ = 0, ring1_ = 0, ar_in_ = 0, slots_ = 0, ar_out_ = 0, total_ = 0;
};

// What one rank reports to rank 0 (gathered as raw bytes: trivially copyable).
struct DemoRankResult {
  double ring_seconds = 0;
  double all_reduce_seconds = 0;
  demo::Check check;
};
static_assert(std::is_trivially_copyable_v<DemoRankResult>, "gathered from every rank as raw bytes");

}  // namespace aperture::demo
