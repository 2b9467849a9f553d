// bench/report/bench_report.cpp — what `aperture bench` prints and writes: the table, CSV, JSON, PNG.
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench.h"

#include "launcher/args.h"

#include "aperture/error.h"

namespace aperture::bench {

namespace {

double gbps(std::size_t bytes, double us) { return us > 0 ? static_cast<double>(bytes) / us / 1e3 : 0.0; }

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

std::string now_utc() {
  char text[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return text;
}

}  // namespace

double bus_gbps(const BenchRow& r, double us) {
  if (us <= 0 || r.bytes == 0) return 0.0;
  const double n = r.ranks;
  double size = static_cast<double>(r.bytes), factor = 1.0;
  if (r.op.rfind("all_reduce", 0) == 0) {
    factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
  } else if (r.op.rfind("all_gather", 0) == 0) {  // and its variants (.staged, .symmetric)
    size *= n;  // nccl-tests: the whole output
    factor = n > 1 ? (n - 1) / n : 1.0;
  } else if (r.op.rfind("reduce_scatter", 0) == 0 || r.op == "all_to_all") {
    factor = n > 1 ? (n - 1) / n : 1.0;  // row bytes are already the whole input
  }
  return size / us / 1e3 * factor;
}

void print_table(const std::vector<BenchRow>& rows) {
  if (rows.empty()) return;
  bool second = false;
  for (const BenchRow& r : rows) second = second || r.baseline2_us > 0;
  std::printf("%-19s %-8s %5s %9s  %9s %7s | %-16s %9s %7s %6s", "op", "type", "ranks", "bytes", "aperture", "busbw",
              "baseline", "us/call", "busbw", "ratio");
  if (second) std::printf(" | %-16s %9s %7s %6s", "baseline 2", "us/call", "busbw", "ratio");
  std::printf("\n");
  std::string last_op;
  for (const BenchRow& r : rows) {
    if (!last_op.empty() && r.op != last_op) std::printf("\n");
    last_op = r.op;
    const auto columns = [&](const std::string& name, double us) {
      char u[32] = "-", bw[32] = "-", ratio[32] = "-";
      if (us > 0) {
        std::snprintf(u, sizeof u, "%.2f", us);
        std::snprintf(bw, sizeof bw, "%.1f", bus_gbps(r, us));
        std::snprintf(ratio, sizeof ratio, "%.2fx", r.aperture_us / us);
      }
      std::printf(" | %-16s %9s %7s %6s", name.c_str(), u, bw, ratio);
    };
    std::printf("%-19s %-8s %5d %9s  %9.2f %7.1f", r.op.c_str(), r.type.c_str(), r.ranks, launcher::format_bytes(r.bytes).c_str(),
                r.aperture_us, bus_gbps(r, r.aperture_us));
    columns(r.baseline, r.baseline_us);
    if (second) columns(r.baseline2, r.baseline2_us);
    std::printf("\n");
  }
  std::printf("ratio: aperture's time / the baseline's (below 1: aperture is faster). bytes: each rank's input.\n"
              "busbw: GB/s as nccl-tests computes it (all_reduce x 2(n-1)/n of the buffer; all_gather, reduce_scatter,\n"
              "all_to_all x (n-1)/n of the whole output/input; others bytes / time). ping_pong: one-way latency in us.\n");
  std::fflush(stdout);
}

void write_csv(const std::string& path, const std::vector<BenchRow>& rows) {
  std::ofstream out(path);
  if (!out) throw Error(ErrorCode::system, "bench: cannot write " + path, "std::ofstream");
  out << "memory,op,type,ranks,bytes,iters,aperture_us,aperture_GBps,baseline,baseline_us,baseline_GBps,time_ratio,"
         "aperture_busGBps,baseline_busGBps,baseline2,baseline2_us,baseline2_busGBps,time_ratio2\n";
  for (const BenchRow& r : rows) {
    out << r.memory << ',' << r.op << ',' << r.type << ',' << r.ranks << ',' << r.bytes << ',' << r.iters << ','
        << r.aperture_us << ',' << gbps(r.bytes, r.aperture_us) << ',' << r.baseline << ',' << r.baseline_us << ','
        << gbps(r.bytes, r.baseline_us) << ',' << (r.baseline_us > 0 ? r.aperture_us / r.baseline_us : 0.0) << ','
        << bus_gbps(r, r.aperture_us) << ',' << bus_gbps(r, r.baseline_us) << ',' << r.baseline2 << ','
        << r.baseline2_us << ',' << bus_gbps(r, r.baseline2_us) << ','
        << (r.baseline2_us > 0 ? r.aperture_us / r.baseline2_us : 0.0) << '\n';
  }
  if (!out) throw Error(ErrorCode::system, "bench: writing " + path + " failed", "std::ofstream");
}

std::vector<BenchRow> read_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorCode::invalid_argument, "bench: cannot read " + path + ": give the path of a CSV the bench wrote (--csv)");
  std::vector<BenchRow> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) f.push_back(cell);
    if (f.size() < 12) continue;
    BenchRow r;
    r.memory = f[0];
    r.op = f[1];
    r.type = f[2];
    r.ranks = std::atoi(f[3].c_str());
    r.bytes = std::strtoull(f[4].c_str(), nullptr, 10);
    r.iters = std::atoi(f[5].c_str());
    r.aperture_us = std::strtod(f[6].c_str(), nullptr);
    r.baseline = f[8];
    r.baseline_us = std::strtod(f[9].c_str(), nullptr);
    if (f.size() >= 18) {  // written by a bench with a second baseline column
      r.baseline2 = f[14];
      r.baseline2_us = std::strtod(f[15].c_str(), nullptr);
    }
    rows.push_back(r);
  }
  return rows;
}

void write_json(const std::string& path, const std::vector<BenchRow>& rows) {
  std::ofstream out(path);
  if (!out) throw Error(ErrorCode::system, "bench: cannot write " + path, "std::ofstream");
  utsname u{};
  uname(&u);
  out << "{\n  \"date\": \"" << now_utc() << "\",\n  \"machine\": {\"host\": \"" << json_escape(u.nodename)
      << "\", \"kernel\": \"" << json_escape(u.release) << "\", \"cpu\": \"" << json_escape(cpu_model())
      << "\", \"cores\": " << sysconf(_SC_NPROCESSORS_ONLN) << "},\n  \"rows\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const BenchRow& r = rows[i];
    out << "    {\"memory\": \"" << r.memory << "\", \"op\": \"" << r.op << "\", \"type\": \"" << r.type
        << "\", \"ranks\": " << r.ranks << ", \"bytes\": " << r.bytes << ", \"iters\": " << r.iters
        << ", \"aperture_us\": " << r.aperture_us << ", \"aperture_GBps\": " << gbps(r.bytes, r.aperture_us)
        << ", \"baseline\": \"" << json_escape(r.baseline) << "\", \"baseline_us\": " << r.baseline_us
        << ", \"baseline_GBps\": " << gbps(r.bytes, r.baseline_us)
        << ", \"time_ratio\": " << (r.baseline_us > 0 ? r.aperture_us / r.baseline_us : 0.0)
        << ", \"aperture_busGBps\": " << bus_gbps(r, r.aperture_us) << ", \"baseline_busGBps\": " << bus_gbps(r, r.baseline_us)
        << ", \"baseline2\": \"" << json_escape(r.baseline2) << "\", \"baseline2_us\": " << r.baseline2_us
        << ", \"baseline2_busGBps\": " << bus_gbps(r, r.baseline2_us) << "}"
        << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
  if (!out) throw Error(ErrorCode::system, "bench: writing " + path + " failed", "std::ofstream");
}

// One panel per op; a solid line per rank count for aperture, a dashed one for its baseline and a
// dotted one for the second baseline (when measured). Bus bandwidth, as the table.
// The target time ratio (aperture / the faster baseline) a row is held to, by size: the targets
// of docs/PERFORMANCE.md's first table. GPU collectives: 0.6x up to 256 KiB, 1.0x above, and from
// 64 MiB busbw 1.1x (time 1 / 1.1) for all-reduce, all-gather and reduce-scatter; CPU: 1.0x, and
// all_reduce 0.5x up to 64 KiB (the 4-rank target). put/get and the rest: 1.0x.
namespace {
std::string target_expression(const std::string& memory, const std::string& op) {
  const bool gpu_collective = memory == "gpu" && op != "put" && op != "get" && op.rfind("ping_pong", 0) != 0;
  const bool reduces_or_gathers =
      op.rfind("all_reduce", 0) == 0 || op.rfind("all_gather", 0) == 0 || op.rfind("reduce_scatter", 0) == 0;
  if (gpu_collective && reduces_or_gathers) return "(x <= 262144 ? 0.6 : x >= 67108864 ? 1.0 / 1.1 : 1.0)";
  if (gpu_collective) return "(x <= 262144 ? 0.6 : 1.0)";
  if (memory == "cpu" && op.rfind("all_reduce", 0) == 0) return "(x <= 65536 ? 0.5 : 1.0)";
  return "1.0";
}
}  // namespace

void write_png(const std::string& path, const std::vector<BenchRow>& rows) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("aperture-bench-plot." + std::to_string(getpid()));
  fs::create_directories(dir);
  struct Panel {
    std::string memory, op, type;
  };
  std::vector<std::string> ops;
  std::vector<Panel> panels;
  std::map<std::string, std::set<int>> ranks_of;
  std::map<std::string, std::string> baseline_of, baseline2_of;
  for (const BenchRow& r : rows) {
    if (r.bytes == 0) continue;  // a barrier moves no bytes: no point on a bandwidth plot
    const std::string key = r.memory + " " + r.op + " " + r.type;  // one line per type, not one zigzag
    if (std::find(ops.begin(), ops.end(), key) == ops.end()) {
      ops.push_back(key);
      panels.push_back({r.memory, r.op, r.type});
    }
    ranks_of[key].insert(r.ranks);
    baseline_of[key] = r.baseline;
    // Columns: bytes, busbw of aperture, baseline, baseline2, and the time ratio to the faster baseline.
    const double best = r.baseline_us > 0 && r.baseline2_us > 0 ? std::min(r.baseline_us, r.baseline2_us)
                        : r.baseline_us > 0                     ? r.baseline_us
                                                                : r.baseline2_us;
    std::ofstream data(dir / (std::to_string(std::find(ops.begin(), ops.end(), key) - ops.begin()) + "_" +
                              std::to_string(r.ranks) + ".dat"),
                       std::ios::app);
    data << r.bytes << ' ' << bus_gbps(r, r.aperture_us) << ' '
         << (r.baseline_us > 0 ? std::to_string(bus_gbps(r, r.baseline_us)) : std::string("NaN")) << ' '
         << (r.baseline2_us > 0 ? std::to_string(bus_gbps(r, r.baseline2_us)) : std::string("NaN")) << ' '
         << (best > 0 ? std::to_string(r.aperture_us / best) : std::string("NaN")) << '\n';
    if (r.baseline2_us > 0) baseline2_of[key] = r.baseline2;
  }
  // Two panels per op: bandwidth (each library its own colour and marker; ranks by dash), and the
  // time ratio to the faster baseline with the 1.0 line and the target line, so a miss shows.
  const int lines = static_cast<int>(std::max<std::size_t>(ops.size(), 1));
  std::ofstream gp(dir / "plot.gp");
  gp << "set terminal pngcairo size 1100," << 340 * lines << " font 'sans,9'\n"
     << "set output '" << fs::absolute(path).string() << "'\n"
     << "set multiplot layout " << lines << ",2 title 'aperture bench, " << now_utc()
     << ": bus bandwidth (as nccl-tests), and time ratio aperture / the faster baseline (below the red line: target met)'\n"
     << "set termoption noenhanced\nset logscale x 2\nset format x '%.0b%B'\nset xlabel 'bytes per rank'\n"
     << "set key left top font ',8'\nset grid\n"
     << "set style line 1 lc rgb '#1f77b4' pt 7 lw 2\n"   // aperture: blue, filled circles
     << "set style line 2 lc rgb '#d62728' pt 5 lw 2\n"   // the baseline: red, filled squares
     << "set style line 3 lc rgb '#2ca02c' pt 9 lw 2\n";  // the second baseline: green, filled triangles
  for (std::size_t i = 0; i < ops.size(); ++i) {
    std::vector<std::string> files;
    for (int n : ranks_of[ops[i]]) files.push_back((dir / (std::to_string(i) + "_" + std::to_string(n) + ".dat")).string());
    std::vector<int> ranks(ranks_of[ops[i]].begin(), ranks_of[ops[i]].end());
    gp << "set logscale y 2\nset ylabel 'busbw GB/s'\nset title '" << ops[i] << ": bandwidth'\nplot ";
    for (std::size_t k = 0; k < files.size(); ++k) {
      const std::string dash = " dt " + std::to_string(k + 1);
      const std::string at = " " + std::to_string(ranks[k]) + " ranks'";
      gp << (k ? ", " : "") << "'" << files[k] << "' using 1:2 with linespoints ls 1" << dash << " title 'aperture" << at
         << ", '" << files[k] << "' using 1:3 with linespoints ls 2" << dash << " title '" << baseline_of[ops[i]] << at;
      if (baseline2_of.count(ops[i]) != 0)
        gp << ", '" << files[k] << "' using 1:4 with linespoints ls 3" << dash << " title '" << baseline2_of[ops[i]] << at;
    }
    gp << "\nunset logscale y\nset ylabel 'time ratio'\nset yrange [0:*]\nset title '" << ops[i]
       << ": aperture / faster baseline'\nplot 1.0 with lines lc rgb '#555555' dt 2 lw 1 title '1.0', "
       << target_expression(panels[i].memory, panels[i].op) << " with lines lc rgb '#d62728' lw 2 title 'target'";
    for (std::size_t k = 0; k < files.size(); ++k)
      gp << ", '" << files[k] << "' using 1:5 with linespoints ls 1 dt " << k + 1 << " title 'aperture " << ranks[k]
         << " ranks'";
    gp << "\nset autoscale y\n";
  }
  gp << "unset multiplot\n";
  gp.close();
  const std::string command = "gnuplot '" + (dir / "plot.gp").string() + "' 2>'" + (dir / "gnuplot.log").string() + "'";
  const int status = std::system(command.c_str());
  if (status != 0) {
    std::fprintf(stderr,
                 "aperture bench: no PNG: `gnuplot` failed or is missing (apt-get install gnuplot-nox); the script and "
                 "data are in %s\n",
                 dir.string().c_str());
    return;
  }
  fs::remove_all(dir);
}

}  // namespace aperture::bench
