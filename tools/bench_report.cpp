// tools/bench_report.cpp — what `aperture bench` prints and writes: the table, CSV, JSON, PNG.
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

#include "args.h"
#include "bench.h"

#include "aperture/error.h"

namespace aperture::cli {

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

void print_table(const std::vector<BenchRow>& rows) {
  if (rows.empty()) return;
  std::printf("%-20s %5s %9s  %10s %8s   %-24s %10s %8s  %7s\n", "op", "ranks", "bytes", "aperture", "GB/s",
              "baseline", "baseline", "GB/s", "ratio");
  std::printf("%-20s %5s %9s  %10s %8s   %-24s %10s %8s  %7s\n", "", "", "per rank", "us/call", "", "", "us/call", "",
              "ap/base");
  std::string last_op;
  for (const BenchRow& r : rows) {
    if (!last_op.empty() && r.op != last_op) std::printf("\n");
    last_op = r.op;
    char base_us[32] = "-", base_bw[32] = "-", ratio[32] = "-";
    if (r.baseline_us > 0) {
      std::snprintf(base_us, sizeof base_us, "%.2f", r.baseline_us);
      std::snprintf(base_bw, sizeof base_bw, "%.2f", gbps(r.bytes, r.baseline_us));
      std::snprintf(ratio, sizeof ratio, "%.2fx", r.aperture_us / r.baseline_us);
    }
    std::printf("%-20s %5d %9s  %10.2f %8.2f   %-24s %10s %8s  %7s\n", r.op.c_str(), r.ranks,
                format_bytes(r.bytes).c_str(), r.aperture_us, gbps(r.bytes, r.aperture_us), r.baseline.c_str(), base_us,
                base_bw, ratio);
  }
  std::printf("ratio: aperture's time / the baseline's (below 1: aperture is faster). GB/s: bytes per rank / time.\n");
  std::fflush(stdout);
}

void write_csv(const std::string& path, const std::vector<BenchRow>& rows) {
  std::ofstream out(path);
  if (!out) throw Error("bench: cannot write " + path);
  out << "memory,op,type,ranks,bytes,iters,aperture_us,aperture_GBps,baseline,baseline_us,baseline_GBps,time_ratio\n";
  for (const BenchRow& r : rows) {
    out << r.memory << ',' << r.op << ',' << r.type << ',' << r.ranks << ',' << r.bytes << ',' << r.iters << ','
        << r.aperture_us << ',' << gbps(r.bytes, r.aperture_us) << ',' << r.baseline << ',' << r.baseline_us << ','
        << gbps(r.bytes, r.baseline_us) << ',' << (r.baseline_us > 0 ? r.aperture_us / r.baseline_us : 0.0) << '\n';
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
        << ", \"time_ratio\": " << (r.baseline_us > 0 ? r.aperture_us / r.baseline_us : 0.0) << "}"
        << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
  if (!out) throw Error("bench: writing " + path + " failed");
}

// One panel per op; a solid line per rank count for aperture, a dashed one for its baseline.
void write_png(const std::string& path, const std::vector<BenchRow>& rows) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("aperture-bench-plot." + std::to_string(getpid()));
  fs::create_directories(dir);
  std::vector<std::string> ops;
  std::map<std::string, std::set<int>> ranks_of;
  std::map<std::string, std::string> baseline_of;
  for (const BenchRow& r : rows) {
    if (r.bytes == 0) continue;  // a barrier moves no bytes: no point on a bandwidth plot
    const std::string key = r.memory + " " + r.op;
    if (std::find(ops.begin(), ops.end(), key) == ops.end()) ops.push_back(key);
    ranks_of[key].insert(r.ranks);
    baseline_of[key] = r.baseline;
    std::ofstream data(dir / (std::to_string(std::find(ops.begin(), ops.end(), key) - ops.begin()) + "_" +
                              std::to_string(r.ranks) + ".dat"),
                       std::ios::app);
    data << r.bytes << ' ' << gbps(r.bytes, r.aperture_us) << ' '
         << (r.baseline_us > 0 ? std::to_string(gbps(r.bytes, r.baseline_us)) : std::string("NaN")) << '\n';
  }
  const int columns = ops.size() > 4 ? 3 : static_cast<int>(std::max<std::size_t>(ops.size(), 1));
  const int lines = static_cast<int>((ops.size() + columns - 1) / columns);
  std::ofstream gp(dir / "plot.gp");
  gp << "set terminal pngcairo size " << 520 * columns << "," << 380 * lines << " font 'sans,9'\n"
     << "set output '" << fs::absolute(path).string() << "'\n"
     << "set multiplot layout " << lines << "," << columns << " title 'aperture bench: bandwidth (bytes per rank / time) vs size, " << now_utc() << "'\n"
     << "set termoption noenhanced\nset logscale xy 2\nset format x '%.0b%B'\nset xlabel 'bytes per rank'\nset ylabel 'GB/s'\n"
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

}  // namespace aperture::cli
