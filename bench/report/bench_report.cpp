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
  if (!out) throw Error("bench: cannot write " + path);
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
  if (!out) throw Error("bench: writing " + path + " failed");
}

std::vector<BenchRow> read_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("bench: cannot read " + path);
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
  if (!out) throw Error("bench: cannot write " + path);
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
  if (!out) throw Error("bench: writing " + path + " failed");
}

// One panel per op; a solid line per rank count for aperture, a dashed one for its baseline and a
// dotted one for the second baseline (when measured). Bus bandwidth, as the table.
void write_png(const std::string& path, const std::vector<BenchRow>& rows) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("aperture-bench-plot." + std::to_string(getpid()));
  fs::create_directories(dir);
  std::vector<std::string> ops;
  std::map<std::string, std::set<int>> ranks_of;
  std::map<std::string, std::string> baseline_of, baseline2_of;
  for (const BenchRow& r : rows) {
    if (r.bytes == 0) continue;  // a barrier moves no bytes: no point on a bandwidth plot
    const std::string key = r.memory + " " + r.op + " " + r.type;  // one line per type, not one zigzag
    if (std::find(ops.begin(), ops.end(), key) == ops.end()) ops.push_back(key);
    ranks_of[key].insert(r.ranks);
    baseline_of[key] = r.baseline;
    std::ofstream data(dir / (std::to_string(std::find(ops.begin(), ops.end(), key) - ops.begin()) + "_" +
                              std::to_string(r.ranks) + ".dat"),
                       std::ios::app);
    data << r.bytes << ' ' << bus_gbps(r, r.aperture_us) << ' '
         << (r.baseline_us > 0 ? std::to_string(bus_gbps(r, r.baseline_us)) : std::string("NaN")) << ' '
         << (r.baseline2_us > 0 ? std::to_string(bus_gbps(r, r.baseline2_us)) : std::string("NaN")) << '\n';
    if (r.baseline2_us > 0) baseline2_of[key] = r.baseline2;
  }
  const int columns = ops.size() > 4 ? 3 : static_cast<int>(std::max<std::size_t>(ops.size(), 1));
  const int lines = static_cast<int>((ops.size() + columns - 1) / columns);
  std::ofstream gp(dir / "plot.gp");
  gp << "set terminal pngcairo size " << 520 * columns << "," << 380 * lines << " font 'sans,9'\n"
     << "set output '" << fs::absolute(path).string() << "'\n"
     << "set multiplot layout " << lines << "," << columns << " title 'aperture bench: bus bandwidth (as nccl-tests) vs size, " << now_utc() << "'\n"
     << "set termoption noenhanced\nset logscale xy 2\nset format x '%.0b%B'\nset xlabel 'bytes per rank'\nset ylabel 'busbw GB/s'\n"
     << "set key left top font ',8'\nset grid\n";
  for (std::size_t i = 0; i < ops.size(); ++i) {
    gp << "set title '" << ops[i] << " (dashed: " << baseline_of[ops[i]] << ")'\nplot ";
    bool first = true;
    int color = 1;
    for (int n : ranks_of[ops[i]]) {
      const std::string file = (dir / (std::to_string(i) + "_" + std::to_string(n) + ".dat")).string();
      if (!first) gp << ", ";
      first = false;
      gp << "'" << file << "' using 1:2 with linespoints lc " << color << " lw 2 title 'aperture " << n << " ranks', '"
         << file << "' using 1:3 with linespoints lc " << color << " dt 2 title '" << baseline_of[ops[i]] << " " << n
         << " ranks'";
      if (baseline2_of.count(ops[i]) != 0)
        gp << ", '" << file << "' using 1:4 with linespoints lc " << color << " dt 3 title '" << baseline2_of[ops[i]]
           << " " << n << " ranks'";
      ++color;
    }
    gp << "\n";
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
