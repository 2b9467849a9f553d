// tests/conformance/memory_accessor.h — how the conformance suite reaches a provider's memory,
// wherever it lives. Host memory is filled, read and driven by plain CPU code; device memory
// through cudaMemcpy and small kernels. The tests are written once against this interface, so
// the same test (Conformance/ProviderTest.X/<provider>) checks every provider.
//
// Every operation reaches every direct peer (table entry != 0) of the table it is given, in
// slots of `count` elements, with values from pattern(): distinct per rank, element and salt, so
// a wrong peer or offset shows. The operations are issued in order; finish() waits for them.
#pragma once

#include <aperture/aperture.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace conformance {

// The value rank `rank` writes at element `i` (salt: which buffer or round): exact in float
// (below 2^24) and in every integer type used here, for up to 8 ranks.
template <class T>
APERTURE_HD T pattern(int rank, std::size_t i, int salt = 0) {
  return static_cast<T>((rank + 1) * 1000000 + static_cast<long long>(i % 100000) * 8 + salt);
}

// The element types the data operations run on (virtual functions cannot be templates).
enum class Element { int32, int64, float32, float64 };
template <class T>
constexpr Element element_of();
template <>
constexpr Element element_of<std::int32_t>() { return Element::int32; }
template <>
constexpr Element element_of<std::int64_t>() { return Element::int64; }
template <>
constexpr Element element_of<float>() { return Element::float32; }
template <>
constexpr Element element_of<double>() { return Element::float64; }

// Elements one worker puts, gets or copies per call (the last chunk of a slot may be shorter).
constexpr std::size_t kChunk = 32;

// Word layout of the atomics buffer: one shared word per operation, then `n` words for atomic_cas
// (slot s: 0 -> s + 1 by source s) and `n` for atomic_xchg (slot s: 7 * (s + 1) by source s).
enum AtomicWord { kAdd, kSub, kOr, kAnd, kXor, kMin, kMax, kTicket, kWords };
constexpr std::int64_t kSubStart = 1'000'000'000;

// What a signal ring round saw on this rank: waits that timed out, elements wrong after the wait.
struct RingOutcome {
  unsigned long long timeouts = 0;
  unsigned long long wrong = 0;
};

class MemoryAccessor {
 public:
  virtual ~MemoryAccessor() = default;

  // "host" or "device".
  virtual std::string where() const = 0;
  // Threads that run each operation at once (the atomics count every one).
  virtual int workers() const = 0;
  // Every operation issued so far has completed and its writes are visible to this rank.
  virtual void finish() = 0;

  // ---- this rank's memory --------------------------------------------------------------------
  virtual void write(void* dst, const void* host_src, std::size_t bytes) = 0;
  virtual void read(void* host_dst, const void* src, std::size_t bytes) const = 0;
  virtual void zero(void* dst, std::size_t bytes) = 0;
  // Memory of this rank's kind that no provider owns (results, counters); released with release().
  virtual void* scratch(std::size_t bytes) = 0;
  virtual void release(void* scratch) = 0;
  // Whether `p` is this rank's memory of this kind (device: on this rank's current GPU).
  virtual bool is_local(const void* p) const = 0;
  // The current GPU's memory as cudaMemGetInfo sees it: free bytes, and bytes in use by every
  // process on it (total - free). Host: 0 and 0.
  virtual std::size_t device_bytes_free() const = 0;
  virtual std::size_t device_bytes_in_use() const = 0;
  // GPUs this process sees and the current one (host: 0 and -1).
  virtual int device_count() const = 0;
  virtual int current_device() const = 0;
  // For every rank of `team`, whether this rank's memory of this kind should reach that rank's
  // directly, judged from the hardware alone (collective). Empty: this kind cannot tell (host
  // memory, where some providers are legitimately indirect on one machine).
  virtual std::vector<std::uint8_t> expected_reach(aperture::Team& team) const {
    (void)team;
    return {};
  }

  template <class T>
  std::vector<T> read(const T* src, std::size_t count) const {
    std::vector<T> host(count);
    if (count != 0) read(host.data(), src, count * sizeof(T));
    return host;
  }
  template <class T>
  void write(T* dst, const std::vector<T>& values) {
    if (!values.empty()) write(dst, values.data(), values.size() * sizeof(T));
  }

  // ---- the operations ------------------------------------------------------------------------
  // data[i] = pattern(rank, i, salt), locally.
  virtual void fill(Element, void* data, std::size_t count, int rank, int salt) = 0;
  // inbox[me][i] of every direct peer = pattern(me, i, salt): one aperture::store per element.
  virtual void store_to_peers(Element, void* inbox, std::size_t count, int me, int n, const std::int64_t* table,
                              int salt) = 0;
  // result[p][i] = peer p's src[i]: one aperture::load per element.
  virtual void load_from_peers(Element, void* result, const void* src, std::size_t count, int me, int n,
                               const std::int64_t* src_table) = 0;
  // inbox[me] of every direct peer = my src: one aperture::put per kChunk elements.
  virtual void put_to_peers(Element, void* inbox, const void* src, std::size_t count, int me, int n,
                            const std::int64_t* inbox_table) = 0;
  // result[p] = peer p's src: one aperture::get per kChunk elements.
  virtual void get_from_peers(Element, void* result, const void* src, std::size_t count, int me, int n,
                              const std::int64_t* src_table) = 0;
  // Third-party copies: for every direct a and b, a's src -> b's inbox[me * n + a], both pointers
  // in this rank's address space and translated by the one table (one allocation holds both).
  virtual void copy_between_peers(Element, void* inbox, const void* src, std::size_t count, int me, int n,
                                  const std::int64_t* table) = 0;

  // Every atomic from every worker (add, sub) or one worker (the rest) into every direct peer's
  // `words` (layout: AtomicWord). cas_seen[p] and xchg_seen[p] get what this rank's atomic_cas
  // and atomic_xchg returned at peer p (this rank's scratch memory).
  virtual void atomics_to_peers(std::int64_t* words, int me, int n, const std::int64_t* table,
                                std::int64_t* cas_seen, std::int64_t* xchg_seen) = 0;
  // view[me][i] of every direct peer = pattern(me, i, 5) through the view's table; returns how
  // many elements the whole allocation's table translated elsewhere.
  virtual unsigned long long store_through_view(std::int64_t* view, std::size_t count, int me, int n,
                                                const std::int64_t* view_table, const std::int64_t* whole_table) = 0;
  // One round of a ring: store pattern(me, i, round) into the next rank's data, signal its flag
  // `round` (release), wait for this rank's flag to reach `round` (acquire, bounded) and check
  // what the previous rank stored.
  virtual RingOutcome signal_ring(aperture::PeerView peers, std::int64_t* data, std::size_t count,
                                  std::uint64_t* flag, std::uint64_t round) = 0;
  // out[me][i] of every peer direct in both tables = that peer's in[i] + add: a load through one
  // table and a store through another, in the same loop.
  virtual void relay(const std::int64_t* in, const std::int64_t* in_table, std::int64_t* out,
                     const std::int64_t* out_table, std::size_t count, int me, int n, std::int64_t add) = 0;
};

// The accessor for a provider's memory kind; null with `why` set where this build or machine
// cannot reach that kind (a device provider in a build without CUDA, or no GPU here).
std::unique_ptr<MemoryAccessor> make_host_accessor();
std::unique_ptr<MemoryAccessor> make_device_accessor(std::string& why);

}  // namespace conformance
