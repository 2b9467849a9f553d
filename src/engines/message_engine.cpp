// src/engines/message_engine.cpp — the message engine: an operation on a rank of another node
// travels as MPI messages to that rank's service thread, which applies it to its own memory and
// answers. (The other engine, mpi_rma.cpp, lets MPI's one-sided components reach the memory.)
//
// Why a second engine: one-sided MPI reaches only memory MPI may touch, and GPU memory is not
// that for an MPI that is not CUDA-aware (Debian's Open MPI 4.1 is not). Here the target applies
// every operation itself, so its memory may be anything it can write: host memory directly (a
// put is received straight into it), GPU memory through pinned staging and the CUDA runtime,
// atomics with the library's own system-scope atomics (target_memory.h). Two-sided messages
// also work where one-sided components do not open a window at all (seen on the GPU machine,
// docs/MULTINODE.md), so APERTURE_ENGINE=messages offers it for host memory too.
//
// The protocol, per operation (origin -> target on the engine's communicator):
//   1. a WireRequest on kRequestTag: engine id, operation, offset, sizes, operands, and a pair
//      of tags (t, t + 1) private to this call;
//   2. put: the data, in pieces of the engine's piece size, on tag t;
//   3. the target's service thread applies the request (get: sends the data in pieces on tag t)
//      and answers with a WireReply on tag t + 1: ok and the old value, or what failed.
// The origin returns only after the reply, so the operation has completed at the target: a
// signal issued after puts is applied after them, as with direct peers. Every wait is bounded by
// APERTURE_TIMEOUT on both sides (MPI has no timeout of its own), so a dead node ends in an
// aperture::Error naming the rank, never in a hang.
//
// One service thread per process serves every message engine (they are told apart by an id that
// every rank assigns alike, since opening is collective), and is MPI's progress for them: it
// probes while any engine is open, yielding for 2 ms after the last request and then sleeping
// 20 us between probes (idle_loop.h, the loop of the RMA engine's progress thread too), and
// until the barrier of a close that gave up on a rank has completed. It needs
// MPI_THREAD_MULTIPLE.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "aperture/detail/backoff.h"
#include "aperture/detail/env_timeout.h"
#include "aperture/engine_channel.h"
#include "aperture/error.h"
#include "aperture/team.h"
#include "bootstrap/mpi.h"
#include "bootstrap/mpi_comm.h"
#include "common/mpi_check.h"
#include "common/format.h"
#include "engines/apply_request.h"
#include "engines/idle_loop.h"
#include "engines/mpi_engines.h"
#include "engines/target_memory.h"

namespace aperture::detail {

namespace {

constexpr int kRequestTag = 1;
constexpr int kFirstCallTag = 2;  // each call takes a pair: its data on t, its reply on t + 1
// Host memory takes a put or get as one message up to MPI's int count; GPU memory in pieces of
// its staging.
constexpr std::uint64_t kMaxMessageBytes = std::uint64_t{1} << 30;

struct WireRequest {
  std::uint32_t engine = 0;
  std::int32_t tag = 0;
  EngineOp op = EngineOp::put;
  EngineAtomic atomic = EngineAtomic::add;
  EngineElement element = EngineElement::unsigned_int;
  std::uint8_t element_bytes = 0;
  std::uint32_t reserved = 0;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  std::uint64_t piece = 0;  // bytes per data message
  std::uint64_t value = 0;
  std::uint64_t compare = 0;
};
static_assert(std::is_trivially_copyable_v<WireRequest>, "sent as bytes");

struct WireReply {
  std::uint32_t failed = 0;
  std::uint32_t reserved = 0;
  std::uint64_t result = 0;
  char message[496] = {};
};
static_assert(std::is_trivially_copyable_v<WireReply>, "sent as bytes");

std::string mpi_text(int code) { return mpi_error_text(code); }

// The bytes of the target's copy an operation reads or writes (checked on both sides).
std::uint64_t bytes_touched(EngineOp op, std::uint64_t bytes, std::uint8_t element_bytes) {
  if (op == EngineOp::put || op == EngineOp::get) return bytes;
  return op == EngineOp::signal ? sizeof(std::uint64_t) : element_bytes;
}

constexpr const char* kNoAnswer = "no answer";
constexpr const char* kStopped = "the service stopped";

// Tests `requests` until all have completed (""), an MPI error (its text), `deadline` (kNoAnswer)
// or, where `stop` is given, until it is set (kStopped).
std::string wait_until(std::vector<MPI_Request>& requests, std::chrono::steady_clock::time_point deadline,
                       bool yield_while_waiting, const std::atomic<bool>* stop = nullptr) {
  const auto timeout = deadline - std::chrono::steady_clock::now();
  Backoff backoff(timeout.count() > 0 ? static_cast<std::uint64_t>(
                                            std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count())
                                      : 0,
                  yield_while_waiting ? 16 : Backoff::kSpins);
  for (;;) {
    int done = 0;
    const int code = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (code != MPI_SUCCESS) return "MPI_Testall: " + mpi_text(code);
    if (done) return {};
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) return kStopped;
    if (!backoff.pause()) return kNoAnswer;
  }
}

// Waits for point-to-point `requests`, of which the first `receives` are receives and the rest
// sends, until `deadline` (or `stop`, as wait_until). "" when all completed; what failed
// otherwise. Given up, a receive still pending is cancelled, so its buffer is free again; a send
// is let go (freed): MPI cannot be relied on to take a send back (MPI-4 deprecates cancelling
// one), and one to a rank that is gone may never end.
std::string complete_all(std::vector<MPI_Request>& requests, std::chrono::steady_clock::time_point deadline,
                         bool yield_while_waiting, std::size_t receives, const std::atomic<bool>* stop = nullptr) {
  std::string why = wait_until(requests, deadline, yield_while_waiting, stop);
  if (why != kNoAnswer && why != kStopped) return why;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    MPI_Request& r = requests[i];
    if (r == MPI_REQUEST_NULL) continue;
    if (i < receives) {
      MPI_Cancel(&r);
      int done = 0;
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    }
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  }
  return why;
}

std::chrono::steady_clock::time_point deadline_from_now() {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(timeout_seconds()));
}

// This rank's memory of one engine, as the service thread sees it.
struct Target {
  std::unique_ptr<TargetMemory> memory;
  std::uint64_t bytes = 0;
};

// The service thread and the engines it serves (one per process; never destroyed: the exit
// handler stops the thread before MPI_Finalize).
class Service {
 public:
  static Service& instance() {
    static Service* service = new Service;
    return *service;
  }

  // Collective (the first call splits MPI's world in the team's order). The id of the new
  // engine, the same on every rank since every rank opens engines in the same order.
  std::uint32_t add(const Team& team, std::shared_ptr<Target> target) {
    std::lock_guard lock(mutex_);
    rank_ = team.rank();
    if (comm_ == MPI_COMM_NULL) {
      APERTURE_MPI_CHECK(MPI_Comm_split(mpi_errors_return_world(), 0, team.rank(), &comm_));
      APERTURE_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
      int found = 0;
      void* upper = nullptr;
      MPI_Comm_get_attr(comm_, MPI_TAG_UB, &upper, &found);
      tag_limit_ = found ? *static_cast<int*>(upper) : 32767;
    }
    const std::uint32_t id = next_id_++;
    targets_[id] = std::move(target);
    if (targets_.size() == 1) start();
    return id;
  }

  // After every rank is done with the engine (its close is collective), or after this rank's
  // close gave up waiting for the others: then `unfinished` is that close's pending barrier. The
  // thread keeps testing it until it completes, since a rank that closes late completes its own
  // barrier only once this rank's part has left, and leaving takes progress on this side.
  void remove(std::uint32_t id, MPI_Request unfinished) {
    std::thread finished;
    {
      std::lock_guard lock(mutex_);
      targets_.erase(id);
      if (unfinished != MPI_REQUEST_NULL) {
        unfinished_.push_back(unfinished);
        unfinished_count_.store(unfinished_.size(), std::memory_order_relaxed);
      }
      if (!targets_.empty() || !unfinished_.empty()) return;
      stop_->store(true);
      finished = std::move(thread_);
    }
    if (finished.joinable()) finished.join();
  }

  MPI_Comm comm() const { return comm_; }

  // A fresh tag pair for one call of this process (calls from several threads at once get
  // different pairs; a pair comes back only after tag_limit_ / 2 later calls).
  int call_tag() {
    const unsigned pairs = static_cast<unsigned>((tag_limit_ - kFirstCallTag) / 2);
    return kFirstCallTag + 2 * static_cast<int>(next_call_.fetch_add(1, std::memory_order_relaxed) % pairs);
  }

 private:
  void start() {  // with mutex_ held
    if (thread_.joinable()) {
      if (!stop_->load()) return;  // still testing unfinished closes: it serves the new engine too
      thread_.join();  // it stopped itself and takes mutex_ no more
    }
    stop_ = std::make_shared<std::atomic<bool>>(false);
    thread_ = std::thread([this, stop = stop_] { run(*stop); });
    if (!exit_handler_) {
      exit_handler_ = true;
      std::atexit([] { instance().stop_at_exit(); });
    }
  }

  void stop_at_exit() {
    std::thread finished;
    {
      std::lock_guard lock(mutex_);
      stop_->store(true);
      finished = std::move(thread_);
    }
    if (finished.joinable()) finished.join();
  }

  // Each thread has its own stop flag, so that a thread being stopped and joined outside mutex_
  // cannot be told to go on by the start of its successor.
  void run(std::atomic<bool>& stop) {
    // Requests come in bursts: yield for 2 ms after each before going back to sleeping.
    run_idle_loop(stop, std::chrono::milliseconds(2), [this, &stop] {
      test_unfinished(stop);
      if (stop.load(std::memory_order_relaxed)) return false;  // start() may be joining us, under mutex_
      int flag = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kRequestTag, comm_, &flag, &status) != MPI_SUCCESS || !flag) return false;
      WireRequest request;
      if (MPI_Recv(&request, sizeof request, MPI_BYTE, status.MPI_SOURCE, kRequestTag, comm_, MPI_STATUS_IGNORE) ==
          MPI_SUCCESS)
        serve(status.MPI_SOURCE, request, stop);
      return true;
    });
  }

  // Tests the barriers of closes that gave up; the thread stops itself once they have completed
  // and no engine is open, and then takes mutex_ no more (run's poll returns at once).
  void test_unfinished(std::atomic<bool>& stop) {
    if (unfinished_count_.load(std::memory_order_relaxed) == 0) return;
    std::lock_guard lock(mutex_);
    std::erase_if(unfinished_, [](MPI_Request& r) {
      int done = 0;
      return MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done;  // an error ends it too
    });
    unfinished_count_.store(unfinished_.size(), std::memory_order_relaxed);
    if (unfinished_.empty() && targets_.empty()) stop.store(true);
  }

  std::shared_ptr<Target> find(std::uint32_t id) {
    std::lock_guard lock(mutex_);
    auto it = targets_.find(id);
    return it == targets_.end() ? nullptr : it->second;
  }

  // Applies one request from `origin` and answers it. Never throws: a failure is the reply's.
  // Its waits end early once the thread is told to stop: every engine is closed then, and a close
  // is collective, so only a request whose origin gave up on it long ago can still be here (one
  // that reached a rank while it was stopped, say), and no origin waits for its answer.
  void serve(int origin, const WireRequest& w, const std::atomic<bool>& stop) {
    const auto deadline = deadline_from_now();
    WireReply reply;
    std::string failure;
    std::shared_ptr<Target> target = find(w.engine);
    const std::uint64_t touched = bytes_touched(w.op, w.bytes, w.element_bytes);
    if (!target)
      failure = detail::format("rank {} has no open engine {} (its allocation was freed there); keep views only "
                               "while their allocation lives",
                               rank_, w.engine);
    else if (w.offset > target->bytes || touched > target->bytes - w.offset)
      failure = detail::format("{} bytes at offset {} lie outside the {} bytes of the allocation", touched, w.offset,
                               target->bytes);
    else if (w.piece == 0 && w.bytes != 0)
      failure = "a request with data but no piece size";
    try {
      switch (w.op) {
        case EngineOp::put: receive_put(origin, w, target.get(), failure, deadline, stop); break;
        case EngineOp::get:
          if (failure.empty()) failure = send_get(origin, w, *target, deadline, stop);
          break;
        case EngineOp::fetch_op:
        case EngineOp::compare_swap: {
          if (!failure.empty()) break;
          EngineRequest r;
          r.op = w.op, r.atomic = w.atomic, r.element = w.element, r.element_bytes = w.element_bytes;
          r.offset = w.offset, r.value = w.value, r.compare = w.compare;
          failure = target->memory->atomic(r, &reply.result);
          break;
        }
        case EngineOp::signal:
          if (failure.empty()) failure = target->memory->signal(w.offset, w.value);
          break;
      }
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty()) {
      reply.failed = 1;
      const std::string text = target ? detail::format("{} on rank {}: {}", target->memory->describe(), rank_, failure)
                                      : failure;
      std::strncpy(reply.message, text.c_str(), sizeof reply.message - 1);
    }
    std::vector<MPI_Request> sent(1, MPI_REQUEST_NULL);
    if (MPI_Isend(&reply, sizeof reply, MPI_BYTE, origin, w.tag + 1, comm_, &sent[0]) == MPI_SUCCESS)
      (void)complete_all(sent, deadline, true, 0, &stop);  // an origin that is gone: nothing more to do
  }

  // A put's pieces into the memory (or, after a failure, received and dropped, so the origin's
  // sends complete and it reads the failure in the reply).
  void receive_put(int origin, const WireRequest& w, Target* target, std::string& failure,
                   std::chrono::steady_clock::time_point deadline, const std::atomic<bool>& stop) {
    std::vector<char> dropped;
    for (std::uint64_t done = 0; done < w.bytes; done += w.piece) {
      const std::uint64_t n = std::min(w.piece, w.bytes - done);
      void* into = nullptr;
      if (failure.empty()) {
        into = target->memory->direct(w.offset + done);
        if (into == nullptr) {
          if (n > target->memory->staging_bytes()) {
            failure = detail::format("a piece of {} bytes does not fit the {}-byte staging", n,
                                     target->memory->staging_bytes());
          } else {
            into = target->memory->staging();
          }
        }
      }
      if (into == nullptr) {
        dropped.resize(n);
        into = dropped.data();
      }
      std::vector<MPI_Request> piece(1, MPI_REQUEST_NULL);
      const int code = MPI_Irecv(into, static_cast<int>(n), MPI_BYTE, origin, w.tag, comm_, &piece[0]);
      std::string why = code == MPI_SUCCESS ? complete_all(piece, deadline, true, 1, &stop) : "MPI_Irecv: " + mpi_text(code);
      if (!why.empty()) {
        if (failure.empty()) failure = "receiving the put's data: " + why;
        return;  // the origin is gone or broken: stop here
      }
      if (failure.empty() && target->memory->direct(w.offset + done) == nullptr)
        target->memory->write_from_staging(w.offset + done, n);
    }
  }

  std::string send_get(int origin, const WireRequest& w, Target& target, std::chrono::steady_clock::time_point deadline,
                       const std::atomic<bool>& stop) {
    for (std::uint64_t done = 0; done < w.bytes; done += w.piece) {
      const std::uint64_t n = std::min(w.piece, w.bytes - done);
      void* from = target.memory->direct(w.offset + done);
      if (from == nullptr) {
        if (n > target.memory->staging_bytes())
          return detail::format("a piece of {} bytes does not fit the {}-byte staging", n,
                                target.memory->staging_bytes());
        target.memory->read_into_staging(w.offset + done, n);
        from = target.memory->staging();
      }
      std::vector<MPI_Request> piece(1, MPI_REQUEST_NULL);
      const int code = MPI_Isend(from, static_cast<int>(n), MPI_BYTE, origin, w.tag, comm_, &piece[0]);
      std::string why = code == MPI_SUCCESS ? complete_all(piece, deadline, true, 0, &stop) : "MPI_Isend: " + mpi_text(code);
      if (!why.empty()) return "sending the get's data: " + why;
    }
    return {};
  }

  Service() = default;

  std::mutex mutex_;
  std::map<std::uint32_t, std::shared_ptr<Target>> targets_;
  std::uint32_t next_id_ = 0;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int tag_limit_ = 32767;
  int rank_ = 0;
  std::atomic<std::uint64_t> next_call_{0};
  std::vector<MPI_Request> unfinished_;  // barriers of closes that gave up, until they complete
  std::atomic<std::size_t> unfinished_count_{0};
  std::shared_ptr<std::atomic<bool>> stop_ = std::make_shared<std::atomic<bool>>(true);  // thread_'s
  std::thread thread_;
  bool exit_handler_ = false;
};

// The origin's side of one engine: what a channel's context points at.
struct Engine {
  std::uint32_t id = 0;
  std::uint64_t bytes = 0;  // every rank's copy is this long (the allocation is symmetric)
  std::uint64_t piece = 0;  // bytes per data message
  std::shared_ptr<Target> own;  // this rank's memory: says whether a local buffer may go to MPI
  std::atomic<bool> closed{false};
};

Error engine_error(ErrorCode code, const EngineRequest& r, const std::string& what) {
  static const char* const names[] = {"put", "get", "atomic", "compare-and-swap", "signal"};
  return Error(code, detail::format("message engine: {} of {} bytes at offset {} of rank {}: {}",
                                    names[static_cast<int>(r.op)], r.bytes ? r.bytes : r.element_bytes, r.offset,
                                    r.peer, what));
}

// What a call that got no answer in time says. Over GPU memory the target's service thread
// applies a request with CUDA calls, and the CUDA driver holds those back while another thread of
// that process waits in a synchronous copy to pageable memory queued behind a running kernel
// (an H200 probe, 2026-12-05): if that kernel waits for this call, neither ever ends.
std::string no_answer(const std::string& why, const Engine& e, int peer) {
  std::string text = detail::format("{} within {} s (APERTURE_TIMEOUT); rank {}'s node may be down or stuck", why,
                                    timeout_seconds(), peer);
  if (e.own->memory->direct(0) == nullptr)  // GPU memory (the allocation is alike on every rank)
    text += detail::format(
        ", or rank {}'s process may be blocked in a synchronous CUDA copy (e.g. torch's .cpu()) behind a kernel "
        "that waits for other nodes: synchronize the device before such a copy (docs/MULTINODE.md)",
        peer);
  return text;
}

void carry_out(void* context, const EngineRequest& r, void* result) {
  Engine& e = *static_cast<Engine*>(context);
  if (e.closed.load(std::memory_order_acquire))
    throw engine_error(ErrorCode::invalid_argument, r,
                       "its allocation was freed; keep views and maps only while their allocation lives");
  const std::uint64_t touched = bytes_touched(r.op, r.bytes, r.element_bytes);
  if (r.offset > e.bytes || touched > e.bytes - r.offset)
    throw engine_error(ErrorCode::invalid_argument, r,
                       detail::format("the access lies outside the peer's {} bytes; keep the pointers inside the "
                                      "allocation the view describes",
                                      e.bytes));
  Service& service = Service::instance();
  const MPI_Comm comm = service.comm();
  WireRequest w;
  w.engine = e.id;
  w.tag = service.call_tag();
  w.op = r.op, w.atomic = r.atomic, w.element = r.element, w.element_bytes = r.element_bytes;
  w.offset = r.offset, w.bytes = r.bytes, w.piece = e.piece, w.value = r.value, w.compare = r.compare;
  const auto deadline = deadline_from_now();

  // A local buffer MPI may not touch (GPU memory) goes through host memory.
  std::vector<char> bounce;
  const bool data = r.op == EngineOp::put || r.op == EngineOp::get;
  char* local = static_cast<char*>(const_cast<void*>(r.local));
  if (data && r.bytes > 0 && !e.own->memory->local_is_host(r.local)) {
    bounce.resize(r.bytes);
    if (r.op == EngineOp::put) e.own->memory->copy_local(bounce.data(), r.local, r.bytes);
    local = bounce.data();
  }

  WireReply reply;
  std::vector<MPI_Request> requests;
  requests.reserve(2 + (data ? r.bytes / e.piece + 1 : 0));
  auto post = [&](int code, const char* call) {
    if (code != MPI_SUCCESS) throw engine_error(ErrorCode::system, r, detail::format("{}: {}", call, mpi_text(code)));
  };
  // The data in pieces on the call's tag: received for a get, sent for a put.
  auto post_pieces = [&] {
    for (std::uint64_t done = 0; done < r.bytes; done += e.piece) {
      const int n = static_cast<int>(std::min(e.piece, r.bytes - done));
      requests.push_back(MPI_REQUEST_NULL);
      if (r.op == EngineOp::get)
        post(MPI_Irecv(local + done, n, MPI_BYTE, r.peer, w.tag, comm, &requests.back()), "MPI_Irecv (data)");
      else
        post(MPI_Isend(local + done, n, MPI_BYTE, r.peer, w.tag, comm, &requests.back()), "MPI_Isend (data)");
    }
  };
  // The reply's and a get's receives are posted before the request goes out.
  requests.push_back(MPI_REQUEST_NULL);
  post(MPI_Irecv(&reply, sizeof reply, MPI_BYTE, r.peer, w.tag + 1, comm, &requests.back()), "MPI_Irecv (reply)");
  if (r.op == EngineOp::get) post_pieces();
  const std::size_t receives = requests.size();  // the receives come first, then the sends
  requests.push_back(MPI_REQUEST_NULL);
  post(MPI_Isend(&w, sizeof w, MPI_BYTE, r.peer, kRequestTag, comm, &requests.back()), "MPI_Isend (request)");
  if (r.op == EngineOp::put) post_pieces();
  if (r.op == EngineOp::get) {
    // A failed get sends no data, only its reply: wait for the reply first, then the data.
    std::vector<MPI_Request> first(1, requests[0]);
    requests[0] = MPI_REQUEST_NULL;
    std::string why = complete_all(first, deadline, false, 1);
    if (why.empty() && reply.failed) {
      // The data's receives will not be matched: cancelled. The request's send has completed or
      // will (the target answered it).
      for (std::size_t i = 1; i < requests.size(); ++i)
        if (requests[i] != MPI_REQUEST_NULL) {
          if (i < receives) MPI_Cancel(&requests[i]);
          MPI_Wait(&requests[i], MPI_STATUS_IGNORE);
        }
      requests.clear();
    }
    if (!why.empty())
      throw engine_error(ErrorCode::timeout, r, no_answer(why, e, r.peer));
  }
  if (std::string why = complete_all(requests, deadline, false, receives); !why.empty())
    throw engine_error(ErrorCode::timeout, r, no_answer(why, e, r.peer));
  if (reply.failed) {
    reply.message[sizeof reply.message - 1] = '\0';
    throw engine_error(ErrorCode::system, r, reply.message);
  }
  if (r.op == EngineOp::get && !bounce.empty()) e.own->memory->copy_local(const_cast<void*>(r.local), local, r.bytes);
  if ((r.op == EngineOp::fetch_op || r.op == EngineOp::compare_swap) && result != nullptr)
    std::memcpy(result, &reply.result, r.element_bytes);
}

// --- host memory -----------------------------------------------------------------------------

class HostTargetMemory final : public TargetMemory {
 public:
  explicit HostTargetMemory(void* base) : base_(static_cast<char*>(base)) {}
  std::string describe() const override { return "host memory"; }
  void* direct(std::uint64_t offset) override { return base_ + offset; }
  void* staging() override { return nullptr; }
  std::uint64_t staging_bytes() const override { return kMaxMessageBytes; }
  void write_from_staging(std::uint64_t, std::uint64_t) override {}
  void read_into_staging(std::uint64_t, std::uint64_t) override {}
  std::string atomic(const EngineRequest& r, std::uint64_t* old_bits) override {
    if (apply_atomic(base_ + r.offset, r, old_bits) != ApplyStatus::ok)
      return "a bitwise atomic on a floating-point element";
    return {};
  }
  std::string signal(std::uint64_t offset, std::uint64_t value) override {
    apply_signal(reinterpret_cast<std::uint64_t*>(base_ + offset), value);
    return {};
  }
  bool local_is_host(const void*) const override { return true; }
  void copy_local(void* to, const void* from, std::uint64_t bytes) const override { std::memcpy(to, from, bytes); }

 private:
  char* base_;
};

}  // namespace

std::unique_ptr<TargetMemory> host_target_memory(void* base) { return std::make_unique<HostTargetMemory>(base); }

OpenEngine open_message_engine(Team& team, std::unique_ptr<TargetMemory> memory, std::size_t bytes) {
  auto target = std::make_shared<Target>();
  const bool staged = memory->direct(0) == nullptr;
  const std::uint64_t piece = staged ? memory->staging_bytes() : kMaxMessageBytes;
  target->memory = std::move(memory);
  target->bytes = bytes;
  auto engine = std::make_shared<Engine>();
  engine->bytes = bytes;
  engine->piece = piece;
  engine->own = target;
  engine->id = Service::instance().add(team, target);
  // Ids agree when every rank opens its engines in the same order; a rank that did not is found
  // here rather than by a request reaching the wrong memory.
  team.check_same("message engine open", {{"engine", engine->id}, {"piece", piece}});
  OpenEngine opened;
  opened.channel.context = engine.get();
  opened.channel.host_call = &carry_out;
  opened.owner = engine;
  opened.close = &close_message_engine;
  return opened;
}

void close_message_engine(OpenEngine& opened) {
  auto engine = std::static_pointer_cast<Engine>(std::const_pointer_cast<void>(opened.owner));
  opened = {};
  if (!engine || engine->closed.exchange(true)) return;
  if (!mpi_is_active()) return;
  // Every rank's calls into this engine have returned once every rank is here (each call waits
  // for its reply), so no request for it is in flight when the target forgets it.
  Service& service = Service::instance();
  std::vector<MPI_Request> barrier(1, MPI_REQUEST_NULL);
  // At the deadline the barrier's request stays pending: MPI may neither cancel nor free a
  // collective's request (Open MPI answers the cancel with MPI_ERR_REQUEST, fatal by default).
  // The service thread tests it from then on, so that a rank which was only late still finds
  // this rank's part of the barrier when it closes.
  std::string why = MPI_Ibarrier(service.comm(), &barrier[0]) == MPI_SUCCESS
                        ? wait_until(barrier, deadline_from_now(), true)
                        : "MPI_Ibarrier failed";
  service.remove(engine->id, why == kNoAnswer ? barrier[0] : MPI_REQUEST_NULL);
  if (!why.empty())
    throw Error(ErrorCode::timeout,
                detail::format("message engine: closing engine {}: {} from every rank within {} s (APERTURE_TIMEOUT); "
                               "a rank did not free its allocation, or its node is down",
                               engine->id, why, timeout_seconds()));
}

}  // namespace aperture::detail
