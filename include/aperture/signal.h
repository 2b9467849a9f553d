// aperture/signal.h — point-to-point synchronisation on 64-bit flags in symmetric memory.
//
// The pattern: put data into a peer, then signal() a flag in the same peer; the peer
// wait_until_ge()s on its own copy of the flag and may then read the data. signal is a release
// store and wait_until_ge an acquire load, both at system scope, so everything the signalling
// thread wrote before signal() is visible to the waiter after the wait returns.
//
// Host waits spin briefly and then back off to yielding and sleeping (detail/backoff.h, the one
// policy of every host wait), and give up with an aperture::Error after APERTURE_TIMEOUT seconds
// (default 60), or as soon as this process's Team learns that the job failed (a rank died: the
// error names it; see detail/host_wait.h). Device waits back off with __nanosleep
// (detail/device_time.h's DeviceBackoff, the one policy of every device wait);
// wait_until_ge_for bounds them, and may be given a cancel word the host raises to end them.
#pragma once

#include <cstdint>

#include "aperture/atomic.h"
#include "aperture/config.h"
#include "aperture/translate.h"

#include "aperture/detail/device_time.h"
#include "aperture/detail/host_wait.h"

namespace aperture {

namespace detail {
APERTURE_HD std::uint64_t load_acquire(const std::uint64_t* flag) {
  auto* f = const_cast<std::uint64_t*>(flag);  // atomic_ref needs a non-const object; we only load.
  return with_atomic_ref(f, scope::system, [](auto ref) -> std::uint64_t { return ref.load(memory_order::acquire); });
}
}  // namespace detail

// The store of signal() into a flag already translated to its receiver (by translate() or
// PeerView::translate()): release semantics at system scope, no table read. For a loop that
// signals the same peer many times: translate once before it. Inside the loop the table would be
// read again after every acquire wait, which costs about 0.15 us per signal on 2x H200.
APERTURE_HD void signal_translated(std::uint64_t* translated_flag, std::uint64_t value) {
  detail::with_atomic_ref(translated_flag, scope::system, [=](auto ref) -> std::uint64_t {
    ref.store(value, detail::memory_order::release);
    return value;
  });
}

// Stores `value` into to_rank's copy of *flag with release semantics at system scope.
APERTURE_HD void signal(std::uint64_t* flag, std::uint64_t value, int from_rank, int to_rank,
                        const std::int64_t* peer_bases) {
  signal_translated(translate(flag, from_rank, to_rank, peer_bases), value);
}

// Waits until the caller's own *local_flag is >= value (acquire, system scope), for at most
// timeout_ns nanoseconds. Returns true and the value seen in *seen when it got there.
// `cancel` (device waits; null: none): a word the host may raise (non-zero) while the wait runs,
// in memory it can store into then (pinned, mapped host memory); the wait then gives up as at its
// timeout. It is read only between backoff sleeps, never in the first polls. Host waits ignore
// it: they ask the job watch (detail/host_wait.h).
APERTURE_HD bool wait_until_ge_for(const std::uint64_t* local_flag, std::uint64_t value, std::uint64_t timeout_ns,
                                   std::uint64_t* seen, const std::uint64_t* cancel = nullptr) {
  APERTURE_IF_DEVICE_ELSE(
      (detail::DeviceBackoff backoff(timeout_ns, cancel); for (;;) {
         const std::uint64_t v = detail::load_acquire(local_flag);
         if (v >= value || !backoff.pause()) {
           if (seen) *seen = v;
           return v >= value;
         }
       }),
      ((void)cancel; return detail::host_wait_until_ge_for(
           local_flag, value, timeout_ns, seen, [](const std::uint64_t* f) { return detail::load_acquire(f); });))
}

// Waits until the caller's own *local_flag is >= value (acquire, system scope) and returns the
// value seen. On the host it throws aperture::Error after APERTURE_TIMEOUT seconds; on the
// device it waits as long as it takes (use wait_until_ge_for to bound it).
APERTURE_HD std::uint64_t wait_until_ge(const std::uint64_t* local_flag, std::uint64_t value) {
  std::uint64_t seen = 0;
  APERTURE_IF_DEVICE_ELSE(
      (while (!wait_until_ge_for(local_flag, value, ~std::uint64_t{0} >> 1, &seen)) {}),
      (if (!wait_until_ge_for(local_flag, value, detail::host_timeout_ns(), &seen))
           detail::throw_wait_timeout(local_flag, value, seen);))
  return seen;
}

}  // namespace aperture
