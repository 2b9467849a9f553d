// bench/main.cpp — the bench program (`aperture bench` runs it): arguments, the driver that
// runs one job per rank count and the worker that is one rank of such a job (the timing loop
// both sides share: timing.cpp).
//
// Without --worker (and not started as a rank) the bench is its own driver: it starts this
// program as `aperture-bench --worker` through the launcher component once per rank count
// (through mpirun when aperture is built with MPI, so Open MPI's collectives run in the same
// processes), collects every job's rows and prints one table. Started as a rank
// (`aperture launch --mpi -n 4 -- aperture bench`, mpirun, torchrun) it runs as that job's
// worker and rank 0 prints the table.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include "bench.h"

#include "launcher/args.h"
#include "launcher/launch.h"
#include "launcher/program_path.h"

#include "aperture/error.h"
#include "aperture/provider.h"
#include "aperture/team.h"

namespace aperture::bench {

using launcher::kExitUsage;
using launcher::parse_bytes;
using launcher::parse_integer;
using launcher::take_option_value;
using launcher::UsageError;

const char* const kBenchUsage =
    "usage: aperture bench [--provider NAME] [-n LIST] [--ops LIST] [--sizes LIST] [--trials T]\n"
    "                      [--trial-ms MS] [--csv FILE] [--json FILE] [--png FILE] [--no-mpi]\n"
    "       aperture bench --from-csv FILE [--json FILE] [--png FILE]\n"
    "\n"
    "Measures aperture against what a user would pick instead, in the same run, and prints a\n"
    "table with the ratio of the times (below 1: aperture is faster).\n"
    "  host memory (shm, mpi-window, openshmem): put/get against memcpy; broadcast, all_gather,\n"
    "    reduce_scatter, all_reduce (automatic, .one_shot, .two_shot) and all_to_all against\n"
    "    Open MPI's MPI_Bcast, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Allreduce and\n"
    "    MPI_Alltoall (float32, sum), started in the same processes through mpirun;\n"
    "  GPU memory (cuda-ipc, ...): put/get against the same kernel on raw peer pointers and the\n"
    "    copy engine; signal/wait_until_ge ping-pong against a raw-pointer one; the collectives\n"
    "    (bfloat16 and float32) against NCCL in the same processes (ncclAllReduce, ncclAllGather,\n"
    "    ncclReduceScatter, ncclBroadcast, grouped ncclSend/ncclRecv) on cudaMalloc buffers and on\n"
    "    symmetric windows, every side as CUDA graphs of captured calls (when built with NCCL);\n"
    "    on request also all_reduce.ll (the push path) and all_gather.staged /\n"
    "    reduce_scatter.staged (the barrier path where the automatic choice pushes), and ag_gemm /\n"
    "    gemm_rs (aperture::OverlappedGemm at the Llama-3-70B MLP shapes, tensor parallel over\n"
    "    the ranks, against cuBLASLt + NCCL serial and on two streams).\n"
    "Each figure is the median of T trials, each trial the slowest rank's mean over enough\n"
    "back-to-back calls to last about --trial-ms, after a team barrier. On host memory the\n"
    "sides' trials alternate (aperture's, each baseline's, then the other way round).\n"
    "\n"
    "  --provider NAME  default (the default), shm, mpi-window, openshmem, cuda-ipc, ...\n"
    "  -n, --ranks LIST rank counts, one job each, e.g. 2,4,8 (default: 2,4,8 on host memory,\n"
    "                   2 on GPU memory)\n"
    "  --ops LIST       e.g. all_reduce,all_gather (default: all of the memory kind)\n"
    "  --sizes LIST     bytes of each rank's input, e.g. 4K,64K,1M (default: 64 B to 4 MiB by\n"
    "                   4x on host memory, 4 KiB to 256 MiB by 4x on GPU memory)\n"
    "  --trials T       trials per figure (default 5)\n"
    "  --trial-ms MS    length of one trial (default 20)\n"
    "  --csv FILE, --json FILE, --png FILE   write the rows (the PNG needs gnuplot)\n"
    "  --no-mpi         start the ranks without mpirun (no MPI columns)\n"
    "  --sequential     host memory: each side's trials one after another, not alternating\n"
    "                   (how rows were timed until 2026-12-06: to compare the two methods)\n"
    "  --max-parts N, --half-bytes B, --ll-part-bytes B   GPU: the Communicator's blocks per\n"
    "                   call, staging half and input bytes per block on the push (LL) path\n"
    "                   (tuning; default: the Communicator's defaults); --half-bytes also on\n"
    "                   host memory\n"
    "  --gemm-m LIST    ag_gemm/gemm_rs: the token counts M (default 128,1024,4096,16384)\n"
    "  --from-csv FILE  measure nothing: print the table of a CSV written before, and write the\n"
    "                   --json/--png/--csv of it\n";

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

bool is_gpu_provider(const std::string& name) {
  const std::string n = name == "default" ? default_provider_name() : name;
  return n == "cuda-ipc" || n == "cuda-vmm" || n == "nvshmem" || n == "nccl";
}

struct Parsed {
  BenchOptions options;
  bool quiet = false;           // internal: the driver prints the table
  std::string ranks_text, ops_text, sizes_text, gemm_m_text;
  std::string from_csv;         // report rows measured before instead of measuring
};

Parsed parse_bench_args(int argc, char** argv) {
  Parsed p;
  BenchOptions& o = p.options;
  std::string value;
  for (int i = 1; i < argc;) {
    const std::string_view arg = argv[i];
    if (take_option_value(argc, argv, i, "", "--provider", value, "shm")) {
      o.provider = value;
    } else if (take_option_value(argc, argv, i, "-n", "--ranks", value, "2,4,8")) {
      p.ranks_text = value;
      for (const std::string& n : split_list(value)) o.ranks.push_back(static_cast<int>(parse_integer("-n", n, 1, 1024)));
    } else if (take_option_value(argc, argv, i, "", "--ops", value, "all_reduce")) {
      p.ops_text = value;
      o.ops = split_list(value);
    } else if (take_option_value(argc, argv, i, "", "--sizes", value, "4K,64K")) {
      p.sizes_text = value;
      for (const std::string& s : split_list(value)) {
        const std::size_t b = parse_bytes("--sizes", s);
        if (b == 0 || b % 4 != 0) throw UsageError("--sizes " + s + ": give a positive multiple of 4 bytes");
        o.sizes.push_back(b);
      }
    } else if (take_option_value(argc, argv, i, "", "--trials", value, "5")) {
      o.trials = static_cast<int>(parse_integer("--trials", value, 1, 1000));
    } else if (take_option_value(argc, argv, i, "", "--trial-ms", value, "20")) {
      o.trial_seconds = static_cast<double>(parse_integer("--trial-ms", value, 1, 100000)) / 1e3;
    } else if (take_option_value(argc, argv, i, "", "--csv", value, "bench.csv")) {
      o.csv = value;
    } else if (take_option_value(argc, argv, i, "", "--json", value, "bench.json")) {
      o.json = value;
    } else if (take_option_value(argc, argv, i, "", "--png", value, "bench.png")) {
      o.png = value;
    } else if (take_option_value(argc, argv, i, "", "--from-csv", value, "bench.csv")) {
      p.from_csv = value;
    } else if (take_option_value(argc, argv, i, "", "--rows", value, "rows.csv")) {
      o.rows_file = value;
    } else if (take_option_value(argc, argv, i, "", "--max-parts", value, "64")) {
      o.max_parts = static_cast<int>(parse_integer("--max-parts", value, 0, 1024));
    } else if (take_option_value(argc, argv, i, "", "--half-bytes", value, "512K")) {
      o.half_bytes = parse_bytes("--half-bytes", value);
    } else if (take_option_value(argc, argv, i, "", "--ll-part-bytes", value, "4K")) {
      o.ll_part_bytes = parse_bytes("--ll-part-bytes", value);
    } else if (take_option_value(argc, argv, i, "", "--gemm-m", value, "128,4096")) {
      p.gemm_m_text = value;
      o.gemm_rows.clear();
      for (const std::string& m : split_list(value))
        o.gemm_rows.push_back(static_cast<std::size_t>(parse_integer("--gemm-m", m, 1, 1 << 20)));
    } else if (arg == "--no-mpi") {
      o.mpi = false;
      ++i;
    } else if (arg == "--sequential") {
      o.interleave = false;
      ++i;
    } else if (arg == "--worker") {
      o.worker = true;
      ++i;
    } else if (arg == "--quiet") {
      p.quiet = true;
      ++i;
    } else {
      throw UsageError("unknown argument '" + std::string(arg) + "'; see `aperture bench --help`");
    }
  }
  return p;
}

void default_sizes(BenchOptions& o, bool gpu) {
  if (!o.sizes.empty()) return;
  const std::size_t first = gpu ? 4096 : 64, last = gpu ? (std::size_t{256} << 20) : (std::size_t{4} << 20);
  for (std::size_t b = first; b <= last; b *= 4) o.sizes.push_back(b);
}

void write_outputs(const BenchOptions& o, const std::vector<BenchRow>& rows) {
  if (!o.csv.empty()) write_csv(o.csv, rows);
  if (!o.json.empty()) write_json(o.json, rows);
  if (!o.png.empty()) write_png(o.png, rows);
}

int run_worker(const Parsed& p) {
  BenchOptions o = p.options;
  Team team = Team::from_env();
  auto provider = make_provider(o.provider, team);
  const bool gpu = provider->memory_kind() == MemoryKind::device;
  default_sizes(o, gpu);
  if (team.rank() == 0 && !p.quiet)
    std::printf("aperture bench: %s memory, provider %s, %d rank%s, float32 unless noted; median of %d trials\n",
                gpu ? "GPU" : "host", std::string(provider->name()).c_str(), team.size(), team.size() == 1 ? "" : "s",
                o.trials);
  const std::vector<BenchRow> rows = gpu ? bench_device(team, *provider, o) : bench_host(team, *provider, o);
  if (team.rank() == 0) {
    if (!p.quiet) print_table(rows);
    if (!o.rows_file.empty()) write_csv(o.rows_file, rows);
    write_outputs(o, rows);
  }
  return 0;
}

}  // namespace

int bench_main(int argc, char** argv) {
  if (launcher::is_mpi_rank_shim(argc, argv)) return launcher::mpi_rank_main(argc - 1, argv + 1);
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::cout << kBenchUsage;
      return 0;
    }
  Parsed p;
  try {
    p = parse_bench_args(argc, argv);
    if (p.options.worker || launcher::started_as_a_rank()) return run_worker(p);
  } catch (const UsageError& e) {
    std::cerr << "aperture bench: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "aperture bench: " << e.what() << "\n";
    return 1;
  }
  // Rows measured before: the table and the other outputs again (e.g. a PNG on another machine).
  if (!p.from_csv.empty()) {
    try {
      const std::vector<BenchRow> rows = read_csv(p.from_csv);
      print_table(rows);
      write_outputs(p.options, rows);
      return 0;
    } catch (const std::exception& e) {
      std::cerr << "aperture bench: " << e.what() << "\n";
      return 1;
    }
  }
  // The driver: one job per rank count, then one table of all of them.
  try {
    BenchOptions& o = p.options;
    const bool gpu = is_gpu_provider(o.provider);
    if (o.ranks.empty()) o.ranks = gpu ? std::vector<int>{2} : std::vector<int>{2, 4, 8};
    const auto tmp = std::filesystem::temp_directory_path() / ("aperture-bench." + std::to_string(getpid()));
    std::filesystem::create_directories(tmp);
    std::vector<BenchRow> all;
#if APERTURE_BENCH_WITH_MPI
    const bool use_mpi = o.mpi && !gpu;
#else
    const bool use_mpi = false;
#endif
    for (int n : o.ranks) {
      launcher::LaunchOptions job;
      job.ranks = n;
      job.program = "aperture-bench";
      job.program_path = launcher::self_executable();
      const std::string rows = (tmp / ("rows." + std::to_string(n) + ".csv")).string();
      job.args = {"--worker", "--quiet", "--provider", o.provider, "--rows", rows,
                     "--trials", std::to_string(o.trials),
                     "--trial-ms", std::to_string(static_cast<int>(o.trial_seconds * 1e3 + 0.5))};
      if (!p.ops_text.empty()) job.args.insert(job.args.end(), {"--ops", p.ops_text});
      if (!p.sizes_text.empty()) job.args.insert(job.args.end(), {"--sizes", p.sizes_text});
      if (!p.gemm_m_text.empty()) job.args.insert(job.args.end(), {"--gemm-m", p.gemm_m_text});
      if (o.max_parts != 0) job.args.insert(job.args.end(), {"--max-parts", std::to_string(o.max_parts)});
      if (o.half_bytes != 0) job.args.insert(job.args.end(), {"--half-bytes", std::to_string(o.half_bytes)});
      if (o.ll_part_bytes != 0)
        job.args.insert(job.args.end(), {"--ll-part-bytes", std::to_string(o.ll_part_bytes)});
      if (!o.interleave) job.args.push_back("--sequential");
      job.use_mpi = use_mpi;
      job.prefix_stdout = false;
      std::fprintf(stderr, "aperture bench: %d rank%s on %s%s ...\n", n, n == 1 ? "" : "s", o.provider.c_str(),
                   use_mpi ? " (through mpirun, with MPI columns)" : "");
      const int status = launcher::launch(job);
      if (status != 0) {
        std::filesystem::remove_all(tmp);
        return status;
      }
      const std::vector<BenchRow> got = read_csv(rows);
      all.insert(all.end(), got.begin(), got.end());
    }
    std::filesystem::remove_all(tmp);
    // One block per op (in the order the ops ran), rank counts ascending inside it, sizes as measured.
    std::vector<std::string> order;
    for (const BenchRow& r : all)
      if (std::find(order.begin(), order.end(), r.op) == order.end()) order.push_back(r.op);
    const auto rank_of = [&](const std::string& op) { return std::find(order.begin(), order.end(), op) - order.begin(); };
    std::stable_sort(all.begin(), all.end(), [&](const BenchRow& a, const BenchRow& b) {
      const auto ra = rank_of(a.op), rb = rank_of(b.op);
      return ra != rb ? ra < rb : a.ranks < b.ranks;
    });
    std::printf("aperture bench: provider %s; times per call are the median of %d trials of the slowest rank\n",
                o.provider.c_str(), o.trials);
    print_table(all);
    write_outputs(o, all);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "aperture bench: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace aperture::bench

int main(int argc, char** argv) { return aperture::bench::bench_main(argc, argv); }
