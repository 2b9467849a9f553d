// src/collectives/nccl_between_nodes.cpp — NcclBetweenNodes (nccl_between_nodes.h): the exchange
// between nodes on NCCL's nonblocking communicators, every wait bounded by APERTURE_TIMEOUT.
#include "nccl_between_nodes.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "aperture/detail/backoff.h"
#include "aperture/detail/host_wait.h"
#include "aperture/error.h"
#include "common/nccl_check.h"

namespace aperture::collectives::detail {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kWho = "Communicator (across nodes)";
// What a failure message ends with: what the caller can do.
constexpr const char* kAfterFailure =
    "; the NCCL communicators were aborted and this Communicator refuses further calls across nodes (results since "
    "are invalid): make a new one, or set APERTURE_COLLECTIVES_BETWEEN_NODES=mpi to exchange through MPI";

std::string seconds(std::uint64_t ns) { return std::to_string(static_cast<double>(ns) / 1e9) + " s"; }

using aperture::detail::reported_job_failure;

// A rank that dies shows in NCCL first, as a connection its proxy finds closed, and NCCL's
// account of that names no rank; the job watch names the rank a moment later (the hub sees the
// same connection close). How long a failure found in NCCL or on the GPU waits for that name.
constexpr auto kLostRankGrace = std::chrono::milliseconds(500);

// How long a failed communicator is given to go quiet after ncclCommRevoke before it is
// aborted anyway, and how long a caller's error waits for that abort (then it is thrown regardless:
// a survivor names the lost rank well within mpirun's grace, even where NCCL's cleanup is slow).
constexpr auto kQuiesceGrace = std::chrono::seconds(2);
constexpr auto kAbortWait = std::chrono::seconds(1);

// Ends communicators after a failure, all of them together. NCCL 2.28's ncclCommRevoke raises a
// communicator's abort flag at once, so its kernels stop; ncclCommAbort then frees NCCL's buffers,
// and its proxy thread's cudaFreeHost waits for the whole device. One stream may hold the kernels of
// several of our communicators (a round's collectives are enqueued together), so an abort before
// every communicator's revoke waits for a kernel that only a later revoke would stop: on the H200
// that stalled the survivors' teardown (bench/results/2026-12-04-h200-x1/run20-kill-core).
// So: revoke every one, wait (bounded, once for all) until NCCL calls each quiescent, then abort
// each. Each handle is nulled.
void end_after_failure(std::span<ncclComm_t> comms) {
#if NCCL_VERSION_CODE >= 22800
  std::vector<ncclComm_t> revoked;
  for (ncclComm_t c : comms) {
    if (c == nullptr) continue;
    // A nonblocking communicator (all of ours) may answer ncclInProgress: the revoke goes on.
    if (const ncclResult_t r = ncclCommRevoke(c, NCCL_REVOKE_DEFAULT); r == ncclSuccess || r == ncclInProgress)
      revoked.push_back(c);
  }
  const auto until = Clock::now() + kQuiesceGrace;
  for (ncclComm_t c : revoked) {
    for (;;) {
      ncclResult_t state = ncclInProgress;
      if (ncclCommGetAsyncError(c, &state) != ncclSuccess || state != ncclInProgress || Clock::now() >= until) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
#endif
  for (ncclComm_t& c : comms) {
    if (c != nullptr) ncclCommAbort(c);
    c = nullptr;
  }
}

// The job watch's failure ("rank 0: the job failed: rank 1 ... was killed"), waited for up to
// kLostRankGrace; "" when the job reports none.
std::string lost_rank_within_grace() {
  const auto until = Clock::now() + kLostRankGrace;
  for (;;) {
    if (std::string lost = reported_job_failure(); !lost.empty()) return lost;
    if (Clock::now() >= until) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// An exchange enqueued on a stream, not yet seen finished by the watch.
struct Pending {
  cudaEvent_t done = nullptr;
  Clock::time_point deadline;
  std::string what;  // "ncclAllGather (all_reduce between nodes) among ranks 0, 2"
};

}  // namespace

struct NcclBetweenNodes::State {
  std::uint64_t timeout_ns = 0;
  std::function<void(const std::string&)> on_failure;  // told of the first failure
  int device = -1;  // the GPU the communicators were made on (the watch's current device)

  std::mutex mutex;  // everything below; held around every NCCL call, by the caller and the watch
  std::array<ncclComm_t, kGroups> comms{};
  std::array<std::string, kGroups> ranks;  // each communicator's team ranks, for messages
  std::string failure;                     // set once: the first failure, as thrown
  ErrorCode failure_code = ErrorCode::peer_lost;
  // Raised once failure and failure_code are set (they never change after): check() reads them
  // without the mutex, which the watch holds while ncclCommAbort runs.
  std::atomic<bool> failed{false};
  // Raised once fail() has ended every communicator (end_after_failure): NCCL's kernels and proxy
  // threads are gone. A failure is thrown after it, or kAbortWait (throw_failure_once_aborted).
  std::atomic<bool> aborted{false};
  std::deque<Pending> pending;
  std::vector<cudaEvent_t> spare_events;

  std::thread watch;
  std::condition_variable wake;
  bool stopping = false;

  ~State() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    if (watch.joinable()) watch.join();
    close();
  }

  // Under the mutex: records the failure and ends every communicator (NCCL's kernels end).
  void fail(ErrorCode code, std::string text) {
    if (failure.empty()) {
      failure = std::move(text) + kAfterFailure;
      failure_code = code;
      failed.store(true, std::memory_order_release);
      if (on_failure) on_failure(failure);
    }
    end_after_failure(comms);
    aborted.store(true, std::memory_order_release);
  }

  // fail() for a failure NCCL or the GPU reported: where the job lost a rank, the lost rank is
  // the cause, named (and the code peer_lost).
  void fail_naming_lost(ErrorCode code, std::string text) {
    if (std::string lost = lost_rank_within_grace(); !lost.empty()) {
      text += "; " + lost;
      code = ErrorCode::peer_lost;
    }
    fail(code, std::move(text));
  }

  [[noreturn]] void throw_failure() const { throw Error(failure_code, failure); }

  // The failure, once the watch has ended the communicators (at most kAbortWait). A caller frees
  // memory on the error, and cudaFree waits for the device: while the abort runs, NCCL's kernel
  // may still be on it, and NCCL's proxy thread, freeing too, waits for the driver lock that the
  // cudaFree holds. On the H200 that stalled a survivor's teardown until a signal woke it
  // (bench/results/2026-12-04-h200-x1/run16-kill-stacks).
  [[noreturn]] void throw_failure_once_aborted() const {
    const auto until = Clock::now() + std::min<Clock::duration>(kAbortWait, std::chrono::nanoseconds(timeout_ns));
    while (!aborted.load(std::memory_order_acquire) && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    throw_failure();
  }

  // Polls `comm` until NCCL's work on the host side is done (creation, an enqueue NCCL reported in
  // progress): bounded by APERTURE_TIMEOUT, ended early by a lost rank. Under the mutex; throws
  // after failing every communicator.
  void wait_ready(ncclComm_t comm, const std::string& what) {
    aperture::detail::Backoff backoff(timeout_ns, 64);
    std::string lost;
    for (;;) {
      ncclResult_t state = ncclInProgress;
      const ncclResult_t asked = ncclCommGetAsyncError(comm, &state);
      if (asked != ncclSuccess) state = asked;
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) {
        const std::string text = aperture::detail::nccl_error_text(state, comm);
        fail_naming_lost(aperture::detail::nccl_error_code(state), std::string(kWho) + ": " + what + " failed: " + text);
        throw_failure();
      }
      const bool more = backoff.pause([&] { lost = reported_job_failure(); });
      if (!lost.empty()) {
        fail(ErrorCode::peer_lost, std::string(kWho) + ": " + what + " abandoned: " + lost);
        throw_failure();
      }
      if (!more) {
        fail(ErrorCode::timeout, std::string(kWho) + ": " + what + " did not complete within APERTURE_TIMEOUT (" +
                                     seconds(timeout_ns) + "): a rank of another node did not make the same call, or "
                                     "NCCL cannot connect the nodes (NCCL_DEBUG=WARN says why)");
        throw_failure();
      }
    }
  }

  // The watch: every millisecond while exchanges are on the GPU (every 10 when none are), the
  // oldest of them, NCCL's asynchronous errors and (every 10 ms) the job watch. Any of them
  // failing aborts every communicator.
  void watch_loop() {
    if (device >= 0) cudaSetDevice(device);
    auto next_job_check = Clock::now();
    std::unique_lock lock(mutex);
    while (!stopping) {
      wake.wait_for(lock, std::chrono::milliseconds(pending.empty() ? 10 : 1), [&] { return stopping; });
      if (stopping || !failure.empty()) continue;
      for (std::size_t g = 0; g < comms.size() && failure.empty(); ++g) {
        if (comms[g] == nullptr) continue;
        ncclResult_t state = ncclSuccess;
        const ncclResult_t asked = ncclCommGetAsyncError(comms[g], &state);
        if (asked != ncclSuccess) state = asked;
        if (state != ncclSuccess && state != ncclInProgress)
          fail_naming_lost(aperture::detail::nccl_error_code(state),
                           std::string(kWho) + ": NCCL among ranks " + ranks[g] + " failed: " +
                               aperture::detail::nccl_error_text(state, comms[g]));
      }
      const auto now = Clock::now();
      while (failure.empty() && !pending.empty()) {
        const cudaError_t e = cudaEventQuery(pending.front().done);
        if (e == cudaSuccess) {
          spare_events.push_back(pending.front().done);
          pending.pop_front();
          continue;
        }
        if (e != cudaErrorNotReady) {
          fail_naming_lost(ErrorCode::system, std::string(kWho) + ": " + pending.front().what + " failed on the GPU: " +
                                                  cudaGetErrorString(e));
        } else if (now > pending.front().deadline) {
          fail_naming_lost(ErrorCode::timeout, std::string(kWho) + ": " + pending.front().what +
                                                   " did not finish on the GPU within APERTURE_TIMEOUT (" +
                                                   seconds(timeout_ns) +
                                                   "): a rank of another node did not make the same call, or is lost");
        }
        break;
      }
      if (failure.empty() && !pending.empty() && now >= next_job_check) {
        next_job_check = now + std::chrono::milliseconds(10);
        if (std::string lost = reported_job_failure(); !lost.empty())
          fail(ErrorCode::peer_lost, std::string(kWho) + ": " + pending.front().what + " abandoned: " + lost);
      }
    }
  }

  // The communicator of group g, made on first use (collective over the group).
  ncclComm_t comm(const Group& g) {
    if (!failure.empty()) throw_failure();
    ncclComm_t& c = comms[static_cast<std::size_t>(g.id)];
    if (c != nullptr) return c;
    ranks[static_cast<std::size_t>(g.id)] = g.ranks;
    const std::string among = " among ranks " + g.ranks;
    ncclUniqueId id{};
    // Rank 0's failure is thrown after the share, so the other ranks do not wait for an id that
    // never comes (they fail in their creation, bounded, with the zero id).
    const ncclResult_t made_id = g.rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
    g.share(&id, sizeof id);
    if (made_id != ncclSuccess)
      throw Error(aperture::detail::nccl_error_code(made_id),
                  std::string(kWho) + ": ncclGetUniqueId" + among + " failed: " +
                      aperture::detail::nccl_error_text(made_id) +
                      " (NCCL_SOCKET_IFNAME names the interface it listens on); or set "
                      "APERTURE_COLLECTIVES_BETWEEN_NODES=mpi",
                  "ncclGetUniqueId");
    if (device < 0 && cudaGetDevice(&device) != cudaSuccess) device = 0;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t made = nullptr;
    const ncclResult_t started = ncclCommInitRankConfig(&made, g.size, id, g.rank, &config);
    const std::string what = "ncclCommInitRankConfig (rank " + std::to_string(g.rank) + " of " +
                             std::to_string(g.size) + ")" + among;
    if (started != ncclSuccess && started != ncclInProgress) {
      const std::string text = aperture::detail::nccl_error_text(started, made);
      if (made != nullptr) ncclCommAbort(made);
      throw Error(aperture::detail::nccl_error_code(started),
                  std::string(kWho) + ": " + what + " failed: " + text +
                      ". NCCL could not join the nodes' GPUs: NCCL_SOCKET_IFNAME and NCCL_IB_HCA pick its network "
                      "(docs/MULTINODE.md), ranks sharing a GPU as separate nodes need a different NCCL_HOSTID per "
                      "node (`aperture launch --nodes` sets it); or set APERTURE_COLLECTIVES_BETWEEN_NODES=mpi",
                  "ncclCommInitRankConfig");
    }
    c = made;
    wait_ready(c, what);
    if (!watch.joinable()) watch = std::thread([this] { watch_loop(); });
    return c;
  }

  // Under the mutex: runs `call` (an NCCL enqueue, or a group of them) on group g's communicator,
  // waits for NCCL's host side where it is in progress, and hands the GPU side to the watch.
  template <class Call>
  void enqueue(const Group& g, const char* nccl_call, const char* what, void* stream, Call&& call) {
    if (failed.load(std::memory_order_acquire)) throw_failure_once_aborted();  // not behind the watch's mutex
    std::lock_guard lock(mutex);
    ncclComm_t c = comm(g);
    const std::string described = std::string(nccl_call) + " (" + what + ") among ranks " + g.ranks;
    const ncclResult_t r = call(c);
    if (r == ncclInProgress) {
      wait_ready(c, described);
    } else if (r != ncclSuccess) {
      const std::string text = aperture::detail::nccl_error_text(r, c);
      fail_naming_lost(aperture::detail::nccl_error_code(r), std::string(kWho) + ": " + described + " failed: " + text);
      throw_failure();
    }
    // Captured into a CUDA graph, the call runs only when the graph is launched, as often as it
    // is: no event of this stream's could tell the watch when that is done (querying one recorded
    // in a capture is an error). NCCL's asynchronous errors are still watched.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &capture) == cudaSuccess &&
        capture != cudaStreamCaptureStatusNone)
      return;
    cudaEvent_t done = nullptr;
    if (!spare_events.empty()) {
      done = spare_events.back();
      spare_events.pop_back();
    } else if (const cudaError_t e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming); e != cudaSuccess) {
      throw Error(ErrorCode::system, std::string(kWho) + ": cudaEventCreateWithFlags (to watch " + described +
                                         ") failed: " + cudaGetErrorString(e), "cudaEventCreateWithFlags");
    }
    if (const cudaError_t e = cudaEventRecord(done, static_cast<cudaStream_t>(stream)); e != cudaSuccess) {
      spare_events.push_back(done);
      throw Error(ErrorCode::system, std::string(kWho) + ": cudaEventRecord (to watch " + described + ") failed: " +
                                         cudaGetErrorString(e), "cudaEventRecord");
    }
    pending.push_back(Pending{done, Clock::now() + std::chrono::nanoseconds(timeout_ns), described});
  }

  // The destructor's: every exchange finished (bounded), then each communicator finalized and
  // destroyed; after a failure, when they do not finish, or once the job lost a rank (a finalize
  // may wait for it), ended as after a failure (end_after_failure). Never throws.
  void close() {
    const auto deadline = Clock::now() + std::chrono::nanoseconds(timeout_ns);
    bool finished = failure.empty() && reported_job_failure().empty();
    for (Pending& p : pending) {
      while (finished) {
        const cudaError_t e = cudaEventQuery(p.done);
        if (e == cudaSuccess) break;
        if (e != cudaErrorNotReady || Clock::now() > deadline || !reported_job_failure().empty()) finished = false;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      spare_events.push_back(p.done);
    }
    pending.clear();
    // Finalized and destroyed in turn while each goes cleanly; from the first that does not, the
    // rest are ended together (end_after_failure: one stuck kernel may belong to a later one).
    for (std::size_t i = 0; i < comms.size(); ++i) {
      ncclComm_t& c = comms[i];
      if (c == nullptr) continue;
      bool clean = finished && ncclCommFinalize(c) == ncclSuccess;
      while (clean) {
        ncclResult_t state = ncclInProgress;
        if (ncclCommGetAsyncError(c, &state) != ncclSuccess || (state != ncclSuccess && state != ncclInProgress) ||
            Clock::now() > deadline || !reported_job_failure().empty())
          clean = false;
        if (state == ncclSuccess) break;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      if (!clean) {
        end_after_failure(std::span(comms).subspan(i));
        break;
      }
      ncclCommDestroy(c);
      c = nullptr;
    }
    for (cudaEvent_t e : spare_events) cudaEventDestroy(e);
    spare_events.clear();
  }
};

bool NcclBetweenNodes::built() { return true; }

NcclBetweenNodes::NcclBetweenNodes(std::uint64_t timeout_ns, std::function<void(const std::string&)> on_failure)
    : state_(std::make_unique<State>()) {
  state_->timeout_ns = timeout_ns;
  state_->on_failure = std::move(on_failure);
}

NcclBetweenNodes::~NcclBetweenNodes() = default;

void NcclBetweenNodes::all_gather(const Group& g, const void* in, void* out, std::size_t bytes, void* stream,
                                  const char* what) {
  state_->enqueue(g, "ncclAllGather", what, stream, [&](ncclComm_t c) {
    return ncclAllGather(in, out, bytes, ncclUint8, c, static_cast<cudaStream_t>(stream));
  });
}

void NcclBetweenNodes::all_gather_varying(const Group& g, const void* in, void* out,
                                          const std::vector<std::size_t>& bytes, void* stream, const char* what) {
  state_->enqueue(g, "ncclBroadcast (one per rank, grouped)", what, stream, [&](ncclComm_t c) {
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return r;
    std::size_t at = 0;
    for (int root = 0; root < g.size; ++root) {
      auto* place = static_cast<unsigned char*>(out) + at;
      const void* send = root == g.rank ? in : place;
      const std::size_t n = bytes[static_cast<std::size_t>(root)];
      at += n;
      if (n == 0) continue;
      r = ncclBroadcast(send, place, n, ncclUint8, root, c, static_cast<cudaStream_t>(stream));
      if (r != ncclSuccess && r != ncclInProgress) break;
    }
    const ncclResult_t ended = ncclGroupEnd();
    return r != ncclSuccess && r != ncclInProgress ? r : ended;
  });
}

void NcclBetweenNodes::broadcast(const Group& g, void* buffer, std::size_t bytes, int root, void* stream,
                                 const char* what) {
  state_->enqueue(g, "ncclBroadcast", what, stream, [&](ncclComm_t c) {
    return ncclBroadcast(buffer, buffer, bytes, ncclUint8, root, c, static_cast<cudaStream_t>(stream));
  });
}

void NcclBetweenNodes::all_to_all(const Group& g, const void* in, void* out, std::size_t bytes, void* stream,
                                  const char* what) {
  state_->enqueue(g, "ncclAlltoAll", what, stream, [&](ncclComm_t c) {
    return ncclAlltoAll(in, out, bytes, ncclUint8, c, static_cast<cudaStream_t>(stream));
  });
}

void NcclBetweenNodes::check() const {
  if (state_->failed.load(std::memory_order_acquire)) state_->throw_failure_once_aborted();
}

}  // namespace aperture::collectives::detail
