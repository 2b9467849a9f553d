// src/engines/mpi_rma.cpp — the host engine: MPI one-sided communication on a window over each
// rank's copy of an allocation.
//
// One window per allocation (MPI_Win_create over this rank's copy, displacement unit 1, on a
// communicator whose rank i is team rank i), locked once for every target (MPI_Win_lock_all,
// passive target) and unlocked when it is freed. Each operation is one MPI call and a
// MPI_Win_flush of its target, so it has completed at the target when it returns: that is
// what keeps a signal behind the data put before it (MPI promises no order between two
// puts otherwise). Atomics are MPI_Fetch_and_op / MPI_Compare_and_swap, atomic with respect to
// each other; a signal is MPI_Accumulate(MPI_REPLACE), so it is never seen half-written.
//
// Passive target needs the target's MPI to make progress over TCP (Open MPI's one-sided
// components answer there from inside MPI calls), and a target rank may be in a Team barrier
// or a wait_until_ge, which call no MPI. So while an engine is open, a progress thread per rank
// calls MPI_Iprobe on the engine's communicator every 20 us (MPI_Iprobe tells nothing about RMA
// that would let it poll less blindly), in the loop idle_loop.h runs for both engines.
// It needs MPI_THREAD_MULTIPLE; without it (the program initialised MPI at a lower level) the
// engine refuses to open.
// The C API only: the deprecated MPI C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "aperture/engine_channel.h"
#include "aperture/error.h"
#include "aperture/team.h"
#include "bootstrap/mpi.h"
#include "common/mpi_check.h"
#include "common/format.h"
#include "engines/engine.h"
#include "engines/idle_loop.h"
#include "engines/mpi_engines.h"

namespace aperture::detail {

namespace {

// MPI_COMM_WORLD in the team's rank order, made once (collectively, at the first attach).
MPI_Comm team_order_comm(const Team& team) {
  static MPI_Comm comm = MPI_COMM_NULL;
  static std::once_flag once;
  std::call_once(once, [&] {
    APERTURE_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, 0, team.rank(), &comm));
    APERTURE_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  });
  return comm;
}

// The progress thread: runs while any engine window is open, stopped before MPI_Finalize (an
// atexit handler registered after MPI's own runs first).
class Progress {
 public:
  static Progress& instance() {
    static Progress* progress = new Progress;  // never destroyed: the exit handler uses it
    return *progress;
  }
  void acquire(MPI_Comm comm) {
    std::lock_guard lock(mutex_);
    if (users_++ > 0) return;
    stop_ = false;
    comm_ = comm;
    thread_ = std::thread([this] { run(); });
    static bool registered = false;
    if (!registered) {
      registered = true;
      std::atexit([] { instance().stop_all(); });
    }
  }
  void release() {
    std::thread finished;
    {
      std::lock_guard lock(mutex_);
      if (users_ == 0 || --users_ > 0) return;
      stop_ = true;
      finished = std::move(thread_);
    }
    if (finished.joinable()) finished.join();
  }
  void stop_all() {
    std::thread finished;
    {
      std::lock_guard lock(mutex_);
      users_ = 0;
      stop_ = true;
      finished = std::move(thread_);
    }
    if (finished.joinable()) finished.join();
  }

 private:
  void run() {
    // Every probe finds nothing (no message carries the tag): the thread sleeps between all of them.
    run_idle_loop(stop_, std::chrono::microseconds(0), [this] {
      int flag = 0;
      MPI_Iprobe(MPI_ANY_SOURCE, kNeverSentTag, comm_, &flag, MPI_STATUS_IGNORE);
      return false;
    });
  }
  static constexpr int kNeverSentTag = 0x6170;  // "ap": the engine's communicator carries no messages
  std::mutex mutex_;
  int users_ = 0;
  std::atomic<bool> stop_{false};
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::thread thread_;
};

struct Window {
  MPI_Win win = MPI_WIN_NULL;
  std::size_t bytes = 0;
  bool locked = false;
  bool progress = false;  // holds the progress thread
};

MPI_Datatype datatype_of(EngineElement element, unsigned bytes) {
  switch (element) {
    case EngineElement::signed_int: return bytes == 4 ? MPI_INT32_T : MPI_INT64_T;
    case EngineElement::unsigned_int: return bytes == 4 ? MPI_UINT32_T : MPI_UINT64_T;
    case EngineElement::floating: return bytes == 4 ? MPI_FLOAT : MPI_DOUBLE;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op op_of(EngineAtomic atomic) {
  switch (atomic) {
    case EngineAtomic::add:
    case EngineAtomic::sub: return MPI_SUM;  // sub adds the negated value
    case EngineAtomic::band: return MPI_BAND;
    case EngineAtomic::bor: return MPI_BOR;
    case EngineAtomic::bxor: return MPI_BXOR;
    case EngineAtomic::min: return MPI_MIN;
    case EngineAtomic::max: return MPI_MAX;
    case EngineAtomic::replace: return MPI_REPLACE;
  }
  return MPI_OP_NULL;
}

// -value in the element's own type, as bits (two's complement for integers: wraps like the
// direct atomic_sub).
std::uint64_t negated(const EngineRequest& r) {
  if (r.element == EngineElement::floating) {
    if (r.element_bytes == 4) {
      float f;
      std::memcpy(&f, &r.value, 4);
      f = -f;
      std::uint64_t bits = 0;
      std::memcpy(&bits, &f, 4);
      return bits;
    }
    double d;
    std::memcpy(&d, &r.value, 8);
    d = -d;
    std::uint64_t bits = 0;
    std::memcpy(&bits, &d, 8);
    return bits;
  }
  const std::uint64_t mask = r.element_bytes == 4 ? 0xffffffffull : ~0ull;
  return (0 - r.value) & mask;
}

void check(int code, const EngineRequest& r, const char* call) {
  if (code == MPI_SUCCESS) return;
  throw Error(ErrorCode::system,
              detail::format("MPI RMA engine: {} to rank {} at offset {} ({} bytes) failed: {}; the peer is on another "
                             "node and reached through MPI, so check that its node is up and that MPI's network works "
                             "(mpirun --mca btl self,vader,tcp)",
                             call, r.peer, r.offset, r.bytes ? r.bytes : r.element_bytes, mpi_error_text(code)));
}

void range_check(const Window& w, const EngineRequest& r, std::uint64_t bytes) {
  if (r.offset > w.bytes || bytes > w.bytes - r.offset)
    throw Error(ErrorCode::invalid_argument,
                detail::format("MPI RMA engine: an access of {} bytes at offset {} of rank {}'s copy lies outside "
                               "its {} bytes; keep the pointers inside the allocation the view describes",
                               bytes, r.offset, r.peer, w.bytes));
}

// Floating add/sub/min/max as a compare-and-swap loop on the word's bits. Open MPI 4.1's UCX
// one-sided component adds a double's bits as an integer (a wrong sum, measured here), and a
// CAS loop is atomic with respect to every other MPI atomic on the word, whatever the component.
void floating_fetch_op(Window& w, const EngineRequest& r, void* result) {
  const MPI_Datatype bits_type = datatype_of(EngineElement::unsigned_int, r.element_bytes);
  const auto disp = static_cast<MPI_Aint>(r.offset);
  std::uint64_t seen = 0;
  check(MPI_Fetch_and_op(nullptr, &seen, bits_type, r.peer, disp, MPI_NO_OP, w.win), r, "MPI_Fetch_and_op(MPI_NO_OP)");
  check(MPI_Win_flush(r.peer, w.win), r, "MPI_Win_flush");
  const auto apply = [&](auto old, auto operand) -> decltype(old) {
    switch (r.atomic) {
      case EngineAtomic::add: return old + operand;
      case EngineAtomic::sub: return old - operand;
      case EngineAtomic::min: return operand < old ? operand : old;
      case EngineAtomic::max: return operand > old ? operand : old;
      default: return old;
    }
  };
  for (;;) {
    std::uint64_t desired = 0;
    if (r.element_bytes == 4) {
      float old, operand;
      std::memcpy(&old, &seen, 4);
      std::memcpy(&operand, &r.value, 4);
      const float next = apply(old, operand);
      std::memcpy(&desired, &next, 4);
    } else {
      double old, operand;
      std::memcpy(&old, &seen, 8);
      std::memcpy(&operand, &r.value, 8);
      const double next = apply(old, operand);
      std::memcpy(&desired, &next, 8);
    }
    std::uint64_t before = 0;
    check(MPI_Compare_and_swap(&desired, &seen, &before, bits_type, r.peer, disp, w.win), r,
          "MPI_Compare_and_swap (floating atomic)");
    check(MPI_Win_flush(r.peer, w.win), r, "MPI_Win_flush");
    if (std::memcmp(&before, &seen, r.element_bytes) == 0) break;
    seen = before;
  }
  std::memcpy(result, &seen, r.element_bytes);
}

void carry_out(void* context, const EngineRequest& r, void* result) {
  Window& w = *static_cast<Window*>(context);
  if (w.win == MPI_WIN_NULL)
    throw Error(ErrorCode::invalid_argument,
                detail::format("MPI RMA engine: an operation on rank {} through an allocation that was freed; keep "
                               "views and maps only while their allocation lives",
                               r.peer));
  const auto disp = static_cast<MPI_Aint>(r.offset);
  switch (r.op) {
    case EngineOp::put:
    case EngineOp::get: {
      range_check(w, r, r.bytes);
      // MPI counts in int: pieces of at most 1 GiB.
      constexpr std::uint64_t kPiece = std::uint64_t{1} << 30;
      for (std::uint64_t done = 0; done < r.bytes; done += kPiece) {
        const int n = static_cast<int>(std::min(kPiece, r.bytes - done));
        auto* local = static_cast<char*>(const_cast<void*>(r.local)) + done;
        if (r.op == EngineOp::put)
          check(MPI_Put(local, n, MPI_BYTE, r.peer, disp + static_cast<MPI_Aint>(done), n, MPI_BYTE, w.win), r,
                "MPI_Put");
        else
          check(MPI_Get(local, n, MPI_BYTE, r.peer, disp + static_cast<MPI_Aint>(done), n, MPI_BYTE, w.win), r,
                "MPI_Get");
      }
      break;
    }
    case EngineOp::fetch_op: {
      range_check(w, r, r.element_bytes);
      if (r.element == EngineElement::floating && r.atomic != EngineAtomic::replace) {
        floating_fetch_op(w, r, result);
        break;
      }
      const std::uint64_t operand = r.atomic == EngineAtomic::sub ? negated(r) : r.value;
      check(MPI_Fetch_and_op(&operand, result, datatype_of(r.element, r.element_bytes), r.peer, disp, op_of(r.atomic),
                             w.win),
            r, "MPI_Fetch_and_op");
      break;
    }
    case EngineOp::compare_swap: {
      range_check(w, r, r.element_bytes);
      // Compared bit for bit, as the direct atomic_cas does: floats go as integers of their size.
      const EngineElement as = r.element == EngineElement::floating ? EngineElement::unsigned_int : r.element;
      check(MPI_Compare_and_swap(&r.value, &r.compare, result, datatype_of(as, r.element_bytes), r.peer, disp, w.win),
            r, "MPI_Compare_and_swap");
      break;
    }
    case EngineOp::signal:
      range_check(w, r, sizeof(std::uint64_t));
      check(MPI_Accumulate(&r.value, 1, MPI_UINT64_T, r.peer, disp, 1, MPI_UINT64_T, MPI_REPLACE, w.win), r,
            "MPI_Accumulate(MPI_REPLACE) of the signal");
      break;
  }
  check(MPI_Win_flush(r.peer, w.win), r, "MPI_Win_flush");
}

}  // namespace

OpenEngine open_rma_engine(Team& team, void* local_base, std::size_t bytes) {
  auto window = std::make_shared<Window>();
  window->bytes = bytes;
  MPI_Info info = MPI_INFO_NULL;
  MPI_Info_create(&info);
  MPI_Info_set(info, "same_disp_unit", "true");
  const int created = MPI_Win_create(local_base, static_cast<MPI_Aint>(bytes), 1, info, team_order_comm(team),
                                     &window->win);
  MPI_Info_free(&info);
  check_mpi(created, detail::format("MPI_Win_create over this rank's {} bytes", bytes),
            "; the MPI RMA engine reaches the other nodes' memory through it. Where this MPI makes no "
            "windows, APERTURE_ENGINE=messages gives host memory aperture's message engine (MPI "
            "point-to-point) instead. Open MPI 4.x picks the window's component (osc) by what the "
            "machine offers, and may have none that works at MPI_THREAD_MULTIPLE (the engine's level): "
            "between ranks of one host, OMPI_MCA_osc=rdma with OMPI_MCA_btl=self,vader and "
            "OMPI_MCA_btl_vader_single_copy_mechanism=cma made windows where the default refused "
            "(docs/MULTINODE.md)");
  MPI_Win_set_errhandler(window->win, MPI_ERRORS_RETURN);
  check_mpi(MPI_Win_lock_all(MPI_MODE_NOCHECK, window->win), "MPI_Win_lock_all");
  window->locked = true;
  Progress::instance().acquire(team_order_comm(team));
  window->progress = true;
  OpenEngine engine;
  engine.channel.context = window.get();
  engine.channel.host_call = &carry_out;
  engine.owner = std::move(window);
  engine.close = &close_rma_engine;
  return engine;
}

void close_rma_engine(OpenEngine& engine) {
  auto window = std::static_pointer_cast<Window>(std::const_pointer_cast<void>(engine.owner));
  engine = {};
  if (!window || window->win == MPI_WIN_NULL) return;
  if (window->progress) Progress::instance().release();
  window->progress = false;
  if (mpi_is_active()) {
    if (window->locked) MPI_Win_unlock_all(window->win);
    window->locked = false;
    check_mpi(MPI_Win_free(&window->win), "MPI_Win_free of the MPI RMA engine's window");
  }
  window->win = MPI_WIN_NULL;  // copies of the channel now refuse
}

}  // namespace aperture::detail
