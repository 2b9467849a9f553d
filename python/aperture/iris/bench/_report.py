"""The three output forms of --benchmark_format: console table, JSON and CSV.

Column and key names are Iris's, so that Iris's tools that read these files (its plot and
compare scripts) read aperture's too; "GPU Time (ms)" keeps its name on a host clock as well.
"""

import csv
import io
import json

from ._axes import dtype_name


def _names_in_order(groups):
    seen = {}
    for group in groups:
        for name in group:
            seen.setdefault(name, None)
    return list(seen)


def console(results):
    """One right-aligned table per benchmark, under a blank line and its name."""
    if not results:
        return ""
    by_name = {}
    for r in results:
        by_name.setdefault(r.benchmark_name, []).append(r)
    lines = []
    for name, rows in by_name.items():
        params = list(rows[0].params)
        columns = [(p, lambda r, p=p: dtype_name(r.params.get(p, ""))) for p in params]
        columns.append(("GPU Time (ms)", lambda r: f"{r.gpu_time_ms:.3f}"))
        columns.append(("Skew %", lambda r: "-" if r.skew_pct is None else f"{r.skew_pct:.1f}"))
        if any(r.bandwidth_gbps is not None for r in rows):
            columns.append(("BW (GB/s)", lambda r: "" if r.bandwidth_gbps is None else f"{r.bandwidth_gbps:.1f}"))
        if any(r.tflops is not None for r in rows):
            columns.append(("TFLOPS", lambda r: "" if r.tflops is None else f"{r.tflops:.1f}"))
        for counter in _names_in_order(r.counters for r in rows):
            columns.append((counter, lambda r, c=counter: f"{r.counters[c]:.3f}" if c in r.counters else ""))
        cells = []
        for r in rows:
            if not r.skipped:
                cells.append([show(r) for _, show in columns])
                continue
            # A skipped point: its first parameter, then the note where the figures would be.
            note = "(skipped)" + (f" {r.skip_reason}" if r.skip_reason else "")
            row = [columns[0][1](r), note] if params else [note]
            cells.append(row + [""] * (len(columns) - len(row)))
        widths = [max([len(title)] + [len(row[i]) for row in cells]) for i, (title, _) in enumerate(columns)]
        lines.append("")
        lines.append(name)
        for row in [[title for title, _ in columns]] + cells:
            lines.append("  ".join(cell.rjust(width) for cell, width in zip(row, widths)))
    return "\n".join(lines) + "\n"


def to_json(results):
    """A list of records; the optional figures appear only where there are some."""
    records = []
    for r in results:
        record = {"benchmark": r.benchmark_name, "world_size": r.world_size,
                  "params": {k: dtype_name(v) for k, v in r.params.items()}, "gpu_time_ms": r.gpu_time_ms,
                  "min_time_ms": r.min_time_ms, "skew_pct": r.skew_pct, "local_times_ms": list(r.local_times_ms)}
        for key in ("bandwidth_gbps", "tflops"):
            if getattr(r, key) is not None:
                record[key] = getattr(r, key)
        if r.counters:
            record["counters"] = dict(r.counters)
        if r.skipped:
            record.update(skipped=True, skip_reason=r.skip_reason)
        records.append(record)
    return json.dumps(records, indent=2) + "\n"


def to_csv(results):
    """One row per point; parameters and counters of every benchmark as columns."""
    if not results:
        return ""
    params = _names_in_order(r.params for r in results)
    counters = _names_in_order(r.counters for r in results)
    header = (["benchmark", "world_size"] + params + ["gpu_time_ms", "min_time_ms", "skew_pct", "bandwidth_gbps",
                                                       "tflops"] + counters + ["skipped", "skip_reason"])
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header)
    writer.writeheader()

    def fixed(value, digits):
        return "" if value is None else f"{value:.{digits}f}"

    for r in results:
        row = {"benchmark": r.benchmark_name, "world_size": r.world_size,
               "gpu_time_ms": "" if r.skipped else fixed(r.gpu_time_ms, 4), "min_time_ms": fixed(r.min_time_ms, 4),
               "skew_pct": fixed(r.skew_pct, 2), "bandwidth_gbps": fixed(r.bandwidth_gbps, 2),
               "tflops": fixed(r.tflops, 2), "skipped": r.skipped, "skip_reason": r.skip_reason}
        row.update({p: dtype_name(r.params.get(p, "")) for p in params})
        row.update({c: fixed(r.counters.get(c), 4) for c in counters})
        writer.writerow(row)
    return out.getvalue()


FORMATS = {"console": console, "json": to_json, "csv": to_csv}
