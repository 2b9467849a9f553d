// tests/multinode/collective_fault.cpp — the survivors' side of a node killed in the middle of
// collectives across nodes (tests/multinode/collective_kill_test.sh kills every rank of node 1).
//
// Every rank runs all_reduce (the whole-vector and the sharded path), all_gather and broadcast
// over the team, forever. A survivor must get an aperture::Error naming a rank of the lost node:
// it prints "collective-fault ok (rank R): <message>" and exits 0, otherwise
// "collective-fault FAILED ..." and 1. SIGTERM is blocked (mpirun stops the survivors with it once a
// rank died, and a survivor must still say what it saw).
//
// Built a second time with CUDA (gpu_collective_fault_test, APERTURE_TEST_GPU; tests/gpu): the
// buffers are then GPU memory of device 0 from the provider APERTURE_GPU_PROVIDER (default
// cuda-ipc), the calls go on a stream of the test's own, and every round ends in
// Communicator::check(stream), a stream synchronize. "ready" comes after a first round, so that the
// NCCL path has made its communicators (in its first exchange) before the kill. A survivor must
// come back out of that synchronize: whatever waits on the GPU for the dead rank (NCCL's kernels)
// must be ended by the library (the NCCL path's watch aborts its communicators on the lost rank),
// not by APERTURE_TIMEOUT or the launcher's kill. A survivor stuck there is the bug this test
// exists to find.
//
// APERTURE_TEST_EXPECT_BETWEEN_NODES=nccl or mpi: fail unless Communicator::between_nodes() says so.
//
// APERTURE_TEST_NODE1_STOPS=1 (2 ranks or more per node): after "ready" the ranks of the other
// nodes stop making calls (the script then kills them) and node 0's ranks broadcast from a rank
// of node 1, forever. That puts the survivors, every time, where a node's ranks part ways: node
// 0's first rank waits for node 1 in the exchange between nodes (on the host, or NCCL's kernel),
// while its other ranks wait in the node's broadcast kernel for it. Once the first rank hears of
// the loss and throws, nothing but the library can end the others' kernel wait before
// APERTURE_TIMEOUT (CollectiveHandle::cancel).

#include <aperture/aperture.h>
#include <aperture/collectives/collectives.h>

#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if defined(APERTURE_TEST_GPU)
#  include <cuda_runtime.h>
#endif

namespace {

// Wall-clock milliseconds, printed in the verdict and teardown lines: the script subtracts the
// moment it killed node 1, so a run says how long each survivor took (a survivor that mpirun
// kills before it reports says nothing, and this is how a passing run shows its margin).
long long wall_ms() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<long long>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
}

// The verdict on what a survivor caught: "ok" (0) where it names a rank of another node.
int verdict(int me, const std::vector<int>& others, const std::string& message) {
  for (int r : others) {
    const std::string needle = "rank " + std::to_string(r);
    for (auto at = message.find(needle); at != std::string::npos; at = message.find(needle, at + 1)) {
      if (at + needle.size() == message.size() || !std::isdigit(static_cast<unsigned char>(message[at + needle.size()]))) {
        std::printf("collective-fault ok (rank %d) [%lld ms]: %s\n", me, wall_ms(), message.c_str());
        return 0;
      }
    }
  }
  std::printf("collective-fault FAILED (rank %d): expected an aperture::Error naming a rank of another node, got: %s\n", me,
              message.c_str());
  return 1;
}

int g_rank = -1;                     // this rank, for the lines below
std::atomic<bool> g_torn_down{false};  // "teardown done" said

// SIGUSR1: the receiving thread writes its stack to stdout (with write(2), beside stdio's lines).
void print_own_stack(int) {
  void* frames[64];
  const int depth = backtrace(frames, 64);
  char head[96];
  const long tid = syscall(SYS_gettid);
  const int n = std::snprintf(head, sizeof head, "collective-fault stack of thread %ld:\n", tid);
  if (n > 0) (void)!write(STDOUT_FILENO, head, static_cast<std::size_t>(n));
  backtrace_symbols_fd(frames, depth, STDOUT_FILENO);
}

// Every thread's name, kernel wait channel and stack (each thread prints its own on SIGUSR1), so
// that a stuck survivor says where it waits (the GPU machine has no gdb, and cuda-gdb's attach
// crashed the process there). collective_kill_test.sh names the frames.
void dump_every_thread() {
  const long self = syscall(SYS_gettid);
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return;
  while (const dirent* entry = readdir(tasks)) {
    const long tid = std::strtol(entry->d_name, nullptr, 10);
    if (tid <= 0 || tid == self) continue;
    const std::string dir = std::string("/proc/self/task/") + entry->d_name;
    std::string name, wchan;
    std::getline(std::ifstream(dir + "/comm"), name);
    std::getline(std::ifstream(dir + "/wchan"), wchan);
    std::printf("collective-fault thread %ld '%s' waits in %s\n", tid, name.c_str(), wchan.c_str());
    syscall(SYS_tgkill, static_cast<long>(getpid()), tid, SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // one stack at a time
  }
  closedir(tasks);
}

// A survivor that has reported must tear down well within mpirun's grace. One whose teardown is
// not done APERTURE_TEST_STACKS_AFTER_MS later (default 2000: inside the GPU runs' 5 s grace)
// prints every thread's stack.
// (After its teardown a survivor waits in MPI_Finalize until mpirun kills it: bootstrap/mpi.cpp.)
void dump_stacks_unless_torn_down() {
  const char* set = std::getenv("APERTURE_TEST_STACKS_AFTER_MS");
  const std::chrono::milliseconds after(set != nullptr ? std::atoll(set) : 2000);
  std::thread([after] {
    std::this_thread::sleep_for(after);
    if (g_torn_down.load()) return;
    std::printf("collective-fault teardown not done %lld ms after the report (rank %d) [%lld ms]: every thread\n",
                static_cast<long long>(after.count()), g_rank, wall_ms());
    dump_every_thread();
  }).detach();
}

// A survivor that has not reported when the script asks (SIGUSR2, sent the same time after the
// kill) prints every thread's stack: where the failure's report waits. The handler only raises a
// flag; this thread, made at the start, does the printing.
std::atomic<bool> g_reported{false};
std::atomic<bool> g_stacks_asked{false};
void on_usr2(int) { g_stacks_asked.store(true); }
void watch_for_stack_requests() {
  std::thread([] {
    while (!g_stacks_asked.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (g_reported.load() || g_torn_down.load()) return;
    std::printf("collective-fault no report yet (rank %d) [%lld ms]: every thread\n", g_rank, wall_ms());
    dump_every_thread();
  }).detach();
}

std::string describe(const std::exception& e) {
  return dynamic_cast<const aperture::Error*>(&e) != nullptr ? std::string(e.what())
                                                              : std::string("not an aperture::Error: ") + e.what();
}

}  // namespace

int main() {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  {
    void* warm[1];
    backtrace(warm, 1);  // loads the unwinder now, not first inside the signal handler
    struct sigaction on_usr1 {};
    on_usr1.sa_handler = print_own_stack;
    sigaction(SIGUSR1, &on_usr1, nullptr);
    struct sigaction stacks_asked {};
    stacks_asked.sa_handler = on_usr2;
    sigaction(SIGUSR2, &stacks_asked, nullptr);
    watch_for_stack_requests();
  }
  std::vector<int> others;  // ranks on other nodes than this one
  int me = -1;
  int code = 1;
  try {
    aperture::Team team = aperture::Team::from_env();
    me = team.rank();
    g_rank = me;
    for (int r = 0; r < team.size(); ++r)
      if (!team.same_node(r)) others.push_back(r);
#if defined(APERTURE_TEST_GPU)
    if (cudaSetDevice(0) != cudaSuccess) throw std::runtime_error("cudaSetDevice(0) failed");
    const char* gpu_provider = std::getenv("APERTURE_GPU_PROVIDER");
    auto provider = aperture::make_provider(gpu_provider != nullptr ? gpu_provider : "cuda-ipc", team);
#else
    auto provider = aperture::make_provider("shm", team);
#endif
    aperture::Communicator comm(*provider, team);
    if (const char* want = std::getenv("APERTURE_TEST_EXPECT_BETWEEN_NODES");
        want != nullptr && comm.between_nodes() != want) {
      std::printf("collective-fault FAILED (rank %d): the exchange between nodes runs on '%s', the test expects '%s'\n",
                  me, std::string(comm.between_nodes()).c_str(), want);
      return 1;
    }
    const std::size_t count = 64 * 1024;  // 256 KiB of floats: the sharded all_reduce
    std::vector<float> in(count * team.size(), static_cast<float>(me)), out(count * team.size());
    float* source = in.data();
    float* result = out.data();
    aperture::Stream stream = nullptr;
#if defined(APERTURE_TEST_GPU)
    // Never freed: on the way out (an error) the provider's heap goes with the provider.
    const std::size_t bytes = in.size() * sizeof(float);
    aperture::Allocation buffers = provider->allocate(2 * bytes);
    source = buffers.as<float>();
    result = source + in.size();
    cudaStream_t cuda_stream = nullptr;
    if (cudaMemcpy(source, in.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaStreamCreateWithFlags(&cuda_stream, cudaStreamNonBlocking) != cudaSuccess)
      throw std::runtime_error("cudaMemcpy/cudaStreamCreateWithFlags failed");
    stream = cuda_stream;
#endif
    const auto run_round = [&](std::uint64_t round) {
      comm.all_reduce(source, result, count, aperture::ReduceOp::sum, aperture::AllReduceAlgorithm::automatic, stream);
      comm.all_reduce(source, result, 100, aperture::ReduceOp::max, aperture::AllReduceAlgorithm::automatic, stream);
      comm.all_gather(source, result, 1000, stream);
      comm.broadcast(source, result, 1000, static_cast<int>(round % static_cast<std::uint64_t>(team.size())), stream);
#if defined(APERTURE_TEST_GPU)
      comm.check(stream);
#endif
    };
    comm.barrier(stream);
    std::uint64_t round = 1;
#if defined(APERTURE_TEST_GPU)
    run_round(round++);
    if (me == 0) std::printf("collective-fault between nodes: %s\n", std::string(comm.between_nodes()).c_str());
#endif
    std::printf("collective-fault ready (rank %d, node %d, pid %d)\n", me, team.node(), static_cast<int>(getpid()));
    const char* stops = std::getenv("APERTURE_TEST_NODE1_STOPS");
    const bool node1_stops = stops != nullptr && std::string(stops) == "1";
    if (node1_stops && team.node() != 0)
      for (;;) pause();  // until the script's SIGKILL (SIGTERM is blocked)
    try {
      if (node1_stops) {
        const int root = others.front();  // a rank of node 1
        for (;;) {
          comm.broadcast(source, result, 1000, root, stream);
#if defined(APERTURE_TEST_GPU)
          comm.check(stream);
#endif
        }
      }
      for (;; ++round) run_round(round);
    } catch (const std::exception& e) {
      // Said before the teardown (the Communicator, the provider, CUDA), which mpirun's SIGKILL
      // may cut short about 1 s after it saw a rank die.
      code = verdict(me, others, describe(e));
      g_reported.store(true);
      dump_stacks_unless_torn_down();
    }
  } catch (const std::exception& e) {
    code = verdict(me, others, describe(e));
    g_reported.store(true);
    dump_stacks_unless_torn_down();
  }
  // The teardown after a lost rank must not wait for it (an engine's collective close, MPI_Win_free,
  // once did): the script requires this line from every survivor.
  g_torn_down.store(true);
  std::printf("collective-fault teardown done (rank %d) [%lld ms]\n", me, wall_ms());
  return code;
}
