"""Rows in the form `aperture bench --csv` writes (bench/report/bench_report.cpp), for the Python
benchmark programs whose figures scripts/perf-table.py reads beside the CLI's:
examples/iris/ccl_overhead.py and bench/python/triton_proxy.py."""

COLUMNS = ("memory", "op", "type", "ranks", "bytes", "iters", "aperture_us", "aperture_GBps", "baseline",
           "baseline_us", "baseline_GBps", "time_ratio", "aperture_busGBps", "baseline_busGBps", "baseline2",
           "baseline2_us", "baseline2_busGBps", "time_ratio2")


def write_rows(path, rows, bandwidth=True):
    """Writes the header and `rows` to `path`. A row is a dict of memory, op, type, ranks, bytes,
    iters, aperture_us, baseline (its name) and baseline_us; time_ratio is aperture_us /
    baseline_us. The GB/s columns are bytes over each time, or 0 with bandwidth=False (a host
    overhead, where bytes per second mean nothing); no bus bandwidth, no second baseline."""
    def gbps(nbytes, us):
        return nbytes / us / 1e3 if bandwidth and us > 0 else 0
    with open(path, "w") as out:
        out.write(",".join(COLUMNS) + "\n")
        for r in rows:
            a, b = r["aperture_us"], r["baseline_us"]
            out.write(f"{r['memory']},{r['op']},{r['type']},{r['ranks']},{r['bytes']},{r['iters']},{a:.4f},"
                      f"{gbps(r['bytes'], a):.4f},{r['baseline']},{b:.4f},{gbps(r['bytes'], b):.4f},{a / b:.4f},"
                      f"0,0,-,0,0,0\n")
