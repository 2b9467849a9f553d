// tests/conformance/host_memory_accessor.cpp — MemoryAccessor for host memory: the operations
// run as plain CPU code on this rank's thread, through the same aperture calls a kernel makes.
#include <cstdlib>
#include <cstring>
#include <new>

#include "memory_accessor.h"
#include "peer_operations.h"

namespace conformance {
namespace {

class HostMemoryAccessor final : public MemoryAccessor {
 public:
  std::string where() const override { return "host"; }
  // Several workers, run one after another: the atomics count each one.
  int workers() const override { return kWorkers; }
  void finish() override {}  // every operation ran to completion when it returned

  void write(void* dst, const void* host_src, std::size_t bytes) override { std::memcpy(dst, host_src, bytes); }
  void read(void* host_dst, const void* src, std::size_t bytes) const override { std::memcpy(host_dst, src, bytes); }
  void zero(void* dst, std::size_t bytes) override { std::memset(dst, 0, bytes); }
  void* scratch(std::size_t bytes) override {
    void* p = std::calloc(1, bytes == 0 ? 1 : bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void release(void* scratch) override { std::free(scratch); }
  bool is_local(const void* p) const override { return p != nullptr; }
  int device_count() const override { return 0; }
  int current_device() const override { return -1; }
  std::size_t device_bytes_free() const override { return 0; }
  std::size_t device_bytes_in_use() const override { return 0; }

  void fill(Element e, void* data, std::size_t count, int rank, int salt) override {
    ops::with_element(e, [&](auto t) { ops::fill(0, 1, static_cast<decltype(t)*>(data), count, rank, salt); });
  }
  void store_to_peers(Element e, void* inbox, std::size_t count, int me, int n, const std::int64_t* table,
                      int salt) override {
    ops::with_element(e, [&](auto t) {
      ops::store_to_peers(0, 1, static_cast<decltype(t)*>(inbox), count, me, n, table, salt);
    });
  }
  void load_from_peers(Element e, void* result, const void* src, std::size_t count, int me, int n,
                       const std::int64_t* src_table) override {
    ops::with_element(e, [&](auto t) {
      using T = decltype(t);
      ops::load_from_peers(0, 1, static_cast<T*>(result), static_cast<const T*>(src), count, me, n, src_table);
    });
  }
  void put_to_peers(Element e, void* inbox, const void* src, std::size_t count, int me, int n,
                    const std::int64_t* inbox_table) override {
    ops::with_element(e, [&](auto t) {
      using T = decltype(t);
      ops::put_to_peers(0, 1, static_cast<T*>(inbox), static_cast<const T*>(src), count, me, n, inbox_table);
    });
  }
  void get_from_peers(Element e, void* result, const void* src, std::size_t count, int me, int n,
                      const std::int64_t* src_table) override {
    ops::with_element(e, [&](auto t) {
      using T = decltype(t);
      ops::get_from_peers(0, 1, static_cast<T*>(result), static_cast<const T*>(src), count, me, n, src_table);
    });
  }
  void copy_between_peers(Element e, void* inbox, const void* src, std::size_t count, int me, int n,
                          const std::int64_t* table) override {
    ops::with_element(e, [&](auto t) {
      using T = decltype(t);
      ops::copy_between_peers(0, 1, static_cast<T*>(inbox), static_cast<const T*>(src), count, me, n, table);
    });
  }
  void atomics_to_peers(std::int64_t* words, int me, int n, const std::int64_t* table, std::int64_t* cas_seen,
                        std::int64_t* xchg_seen) override {
    for (int w = 0; w < kWorkers; ++w) ops::atomics_to_peers(w, words, me, n, table, cas_seen, xchg_seen);
  }
  unsigned long long store_through_view(std::int64_t* view, std::size_t count, int me, int n,
                                        const std::int64_t* view_table, const std::int64_t* whole_table) override {
    return ops::store_through_view(0, 1, view, count, me, n, view_table, whole_table);
  }
  RingOutcome signal_ring(aperture::PeerView peers, std::int64_t* data, std::size_t count, std::uint64_t* flag,
                          std::uint64_t round) override {
    RingOutcome outcome;
    ops::ring_store(0, 1, peers, data, count, round);
    peers.signal(flag, round, (peers.rank + 1) % peers.world_size);  // release: the stores go first
    std::uint64_t seen = 0;
    if (!aperture::wait_until_ge_for(flag, round, ops::kWaitTimeoutNs, &seen)) {
      ++outcome.timeouts;
      return outcome;
    }
    outcome.wrong = ops::ring_wrong(0, 1, peers, data, count, round);
    return outcome;
  }
  void relay(const std::int64_t* in, const std::int64_t* in_table, std::int64_t* out, const std::int64_t* out_table,
             std::size_t count, int me, int n, std::int64_t add) override {
    ops::relay(0, 1, in, in_table, out, out_table, count, me, n, add);
  }

 private:
  static constexpr int kWorkers = 8;
};

}  // namespace

std::unique_ptr<MemoryAccessor> make_host_accessor() { return std::make_unique<HostMemoryAccessor>(); }

#if !APERTURE_CONFORMANCE_WITH_DEVICE
// Built without a CUDA compiler: device memory cannot be reached, and the tests say so.
std::unique_ptr<MemoryAccessor> make_device_accessor(std::string& why) {
  why = "this build has no CUDA compiler (device_memory_accessor.cu not built)";
  return nullptr;
}
#endif

}  // namespace conformance
