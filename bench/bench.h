// bench/bench.h — `aperture bench`: aperture against what a user would pick instead, side by
// side in one run.
//
// CPU (host providers): put/get against memcpy of the same bytes; broadcast, all-gather,
// reduce-scatter, all-reduce and all-to-all against Open MPI's MPI_Bcast, MPI_Allgather,
// MPI_Reduce_scatter_block, MPI_Allreduce and MPI_Alltoall, in the same processes (the ranks
// are started through mpirun when aperture is built with MPI). GPU (GPU providers): put/get
// against the same kernel on raw peer pointers and the copy engine (cudaMemcpyAsync), a
// signal/wait_until_ge ping-pong against a raw-pointer one, and the collectives against NCCL in
// the same processes, on cudaMalloc buffers and on NCCL symmetric windows (when built with NCCL).
//
// Every side is timed the same way: a warm-up, then `trials` trials of `iters` back-to-back
// calls (on GPUs: launches of a CUDA graph of several captured calls), each trial after a team
// barrier; a trial's time per call is its slowest rank's, and the median trial is reported.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace aperture {
class Team;
class Provider;
}  // namespace aperture

namespace aperture::bench {

struct BenchOptions {
  std::vector<int> ranks;                  // jobs to run, one after the other (driver)
  std::string provider = "default";
  std::vector<std::string> ops;            // empty: every op of the memory kind
  std::vector<std::size_t> sizes;          // bytes of each rank's input buffer
  int trials = 5;
  double trial_seconds = 0.02;             // iterations per trial are chosen to last about this
  int max_iters = 2000;
  bool interleave = true;                  // time_interleaved alternates the calls' trials (--sequential: not)
  std::string csv, json, png;              // outputs (rank 0 or the driver writes them)
  std::string rows_file;                   // internal: where a worker leaves its rows for the driver
  bool worker = false;                     // internal: this process is one rank
  bool mpi = true;                         // driver: start ranks through mpirun when built with MPI
  int max_parts = 0;                       // GPU: Communicator::Options::max_parts (0: its default)
  std::size_t half_bytes = 0;              // Communicator::Options::half_bytes (0: its default)
  std::size_t ll_part_bytes = 0;           // GPU: Communicator::Options::ll_part_bytes (0: its default)
  // GPU, ops ag_gemm and gemm_rs: the token counts M of the Llama-3-70B MLP shapes (--gemm-m)
  std::vector<std::size_t> gemm_rows = {128, 1024, 4096, 16384};
};

// One measurement: aperture's time for `op` at `bytes`, and up to two baselines' in the same run.
struct BenchRow {
  std::string memory;    // "cpu" or "gpu"
  std::string op;        // put, get, broadcast, all_gather, reduce_scatter, all_reduce, all_reduce.one_shot, ...
  std::string type;      // element type
  int ranks = 0;
  std::size_t bytes = 0;  // each rank's input buffer
  double aperture_us = 0;
  std::string baseline;  // memcpy, MPI_Allreduce, NCCL, raw peer pointer, ... or "-" when none ran
  double baseline_us = 0;  // 0 when none ran
  int iters = 0;
  std::string baseline2 = "-";  // a second baseline: NCCL on symmetric windows, the copy engine, ...
  double baseline2_us = 0;
};

// Bus bandwidth as nccl-tests computes it, GB/s: the op's nccl-tests size (all-reduce: the
// buffer; all-gather: the whole output; reduce-scatter and all-to-all: the whole input) over the
// time, times 2(n-1)/n for all-reduce and (n-1)/n for all-gather, reduce-scatter and
// all-to-all; plain bytes / time for the rest.
double bus_gbps(const BenchRow& row, double us);

// Per call, microseconds: median over trials of the slowest rank's mean.
struct Timed {
  double us = 0;
  int iters = 0;
};
// `call` runs one operation; `finish` waits for queued work (GPU streams) at the end of a trial.
Timed time_calls(Team& team, const BenchOptions& options, const std::function<void()>& call,
                 const std::function<void()>& finish = {});
// Several calls timed in alternation, each as time_calls would: trial t runs each call for its
// own iteration count, in order on even trials and reversed on odd ones, so a drift of the
// machine or of a link during the run weighs on every call alike (the TCP path between simulated
// nodes changes speed within seconds). The host benchmarks time aperture and its baselines so.
// With options.interleave false (--sequential), each call's trials run one after another.
std::vector<Timed> time_interleaved(Team& team, const BenchOptions& options,
                                    const std::vector<std::function<void()>>& calls,
                                    const std::function<void()>& finish = {});

// The workers: one rank's measurements (every rank returns the same rows).
std::vector<BenchRow> bench_host(Team& team, Provider& provider, const BenchOptions& options);
std::vector<BenchRow> bench_device(Team& team, Provider& provider, const BenchOptions& options);  // bench_device.cu

// Reports (bench_report.cpp).
void print_table(const std::vector<BenchRow>& rows);
void write_csv(const std::string& path, const std::vector<BenchRow>& rows);
std::vector<BenchRow> read_csv(const std::string& path);
void write_json(const std::string& path, const std::vector<BenchRow>& rows);
// Two panels per op, through gnuplot: bandwidth against size (each library its own colour and
// marker) and the time ratio to the faster baseline, with the 1.0 line and the target line.
void write_png(const std::string& path, const std::vector<BenchRow>& rows);

int bench_main(int argc, char** argv);
extern const char* const kBenchUsage;

}  // namespace aperture::bench
