#!/usr/bin/env python3
"""scripts/perf-table.py — the targets table of docs/PERFORMANCE.md, made from committed files.

Reads the targets (bench/targets.toml) and the raw results under bench/results/<date>-<machine>/,
and writes the table between the two marker comments of docs/PERFORMANCE.md. Every figure in that
table comes from a file: a row whose evidence is not there says "not measured" and why.

    python3 scripts/perf-table.py            # rewrite the table in docs/PERFORMANCE.md
    python3 scripts/perf-table.py --check    # exit 1 if the committed table is not what the files give
    python3 scripts/perf-table.py --print    # print the table only

Evidence formats it reads:
  .csv  what `aperture bench --csv` writes (bench/report/bench_report.cpp, write_csv);
  .txt  the table `aperture bench` prints (the same rows; files kept from runs without --csv);
  any file with `regex` in its target: one figure per matching line (groups `bytes`, `value`).
A target names a list of glob patterns (relative to bench/results; `**` matches any folders, a
run's own among them); the first pattern that gives rows wins, and of its matches only the newest
folder's files (by the folder's date) are read, as runs of one measurement: per size point the
median over the runs, then the range over the points.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import glob
import os
import re
import statistics
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = "<!-- perf-table:begin — made by scripts/perf-table.py from bench/targets.toml and bench/results; do not edit by hand -->"
END = "<!-- perf-table:end -->"
CSV_HEADER = "memory,op,type,ranks,bytes,iters,aperture_us"
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
FOLDER = re.compile(r"^(\d{4}-\d{2}-\d{2})-(.+)$")


class SpecError(Exception):
    pass


# ---------------------------------------------------------------------------------------- reading
def parse_size(text: str) -> int:
    """'64', '64K', '4 MiB', '1G' -> bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(i?B)?\s*", text)
    if not m:
        raise SpecError(f"cannot read the size {text!r} (write 64, 4K, 1M or '4 MiB')")
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


def read_bench_csv(path: str) -> list[dict]:
    rows = []
    with open(path, newline="") as f:
        first = f.readline()
        if not first.startswith(CSV_HEADER):
            raise SpecError(f"{path}: not an `aperture bench --csv` file (header {first.strip()!r})")
        f.seek(0)
        for r in csv.DictReader(f):
            rows.append({
                "op": r["op"], "type": r["type"], "ranks": int(r["ranks"]), "bytes": int(r["bytes"]),
                "aperture_us": float(r["aperture_us"]), "baseline": r["baseline"],
                "baseline_us": float(r["baseline_us"]), "baseline2": r.get("baseline2") or "-",
                "baseline2_us": float(r.get("baseline2_us") or 0.0),
            })
    return rows


def read_bench_txt(path: str) -> list[dict]:
    """The table `aperture bench` prints: op type ranks bytes aperture busbw | name us busbw ratio [| ...]."""
    rows = []
    with open(path, errors="replace") as f:
        for line in f:
            parts = [p.strip() for p in line.rstrip("\n").split("|")]
            left = parts[0].split()
            if len(parts) < 2 or len(left) != 7 or left[0] == "op" or left[4] not in UNITS:
                continue
            try:
                row = {"op": left[0], "type": left[1], "ranks": int(left[2]),
                       "bytes": int(left[3]) * UNITS[left[4]], "aperture_us": float(left[5]),
                       "baseline": "-", "baseline_us": 0.0, "baseline2": "-", "baseline2_us": 0.0}
            except ValueError:
                continue
            for k, seg in enumerate(parts[1:3]):
                words = seg.split()
                if len(words) < 4 or words[-3] == "-":
                    continue
                key = "baseline" if k == 0 else "baseline2"
                row[key] = " ".join(words[:-3])
                row[key + "_us"] = float(words[-3])
            rows.append(row)
    return rows


def read_regex(path: str, pattern: str) -> list[dict]:
    rx = re.compile(pattern)
    rows = []
    with open(path, errors="replace") as f:
        for line in f:
            m = rx.search(line)
            if m:
                rows.append({"op": "-", "type": "-", "ranks": 0, "bytes": int(m.group("bytes")),
                             "value": float(m.group("value"))})
    return rows


def read_rows(path: str, target: dict) -> list[dict]:
    if "regex" in target:
        return read_regex(path, target["regex"])
    if path.endswith(".csv"):
        return read_bench_csv(path)
    if path.endswith(".txt"):
        return read_bench_txt(path)
    raise SpecError(f"{path}: no reader for this file (a .csv or .txt from aperture bench, or give `regex`)")


# ------------------------------------------------------------------------------------ measuring
def metric(row: dict, name: str) -> float | None:
    a, b1, b2 = row.get("aperture_us", 0.0), row.get("baseline_us", 0.0), row.get("baseline2_us", 0.0)
    best = min([b for b in (b1, b2) if b > 0], default=0.0)
    if name == "value":
        return row["value"]
    if a <= 0:
        return None
    if name == "time":
        return a / b1 if b1 > 0 else None
    if name == "time2":
        return a / b2 if b2 > 0 else None
    if name == "time_best":
        return a / best if best > 0 else None
    if name == "bw_best":
        return best / a if best > 0 else None
    if name == "bw2":
        return b2 / a if b2 > 0 else None
    raise SpecError(f"unknown metric {name!r} (time, time2, time_best, bw_best, bw2, value)")


def baseline_us(row: dict, name: str) -> float:
    if name in ("time", "value"):
        return row.get("baseline_us", 0.0)
    if name in ("time2", "bw2"):
        return row.get("baseline2_us", 0.0)
    return min([b for b in (row.get("baseline_us", 0.0), row.get("baseline2_us", 0.0)) if b > 0], default=0.0)


def selected(row: dict, t: dict) -> bool:
    if "op" in t and row["op"] not in t["op"]:
        return False
    if "type" in t and row["type"] not in t["type"]:
        return False
    if "ranks" in t and row["ranks"] not in t["ranks"]:
        return False
    if "bytes" in t:
        lo, hi = (parse_size(str(x)) for x in t["bytes"])
        if not lo <= row["bytes"] <= hi:
            return False
    return True


def folder_of(rel: str) -> str:
    return rel.split("/", 1)[0]


def find_evidence(t: dict, results: str) -> tuple[str, list[str], int] | None:
    """(folder, files, pattern index) of the newest folder whose files give selected rows."""
    for k, pattern in enumerate(t["evidence"]):
        paths = sorted(glob.glob(os.path.join(results, pattern), recursive=True))  # `**`: run folders too
        by_folder: dict[str, list[str]] = {}
        for p in paths:
            rel = os.path.relpath(p, results)
            if FOLDER.match(folder_of(rel)):
                by_folder.setdefault(folder_of(rel), []).append(rel)
        for folder in sorted(by_folder, reverse=True):
            files = by_folder[folder]
            if any(selected(r, t) for f in files for r in read_rows(os.path.join(results, f), t)):
                return folder, files, k
    return None


def fmt_us(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.2f} us"


def fmt_range(lo: float, hi: float, fmt) -> str:
    a, b = fmt(lo), fmt(hi)
    if a == b:
        return a
    ua, ub = a.rpartition(" ")[2], b.rpartition(" ")[2]
    if " " in a and ua == ub:  # one unit: "2.69-4.41 us"
        return f"{a.rpartition(' ')[0]}-{b}"
    return f"{a}-{b}"


def check_bound(value: float, bound: str) -> bool:
    m = re.fullmatch(r"\s*(<=|>=)\s*([\d.]+)\s*", bound)
    if not m:
        raise SpecError(f"bound {bound!r}: write '<= 0.6' or '>= 1.1'")
    limit = float(m.group(2))
    # Figures are compared as the table shows them (two decimals), so a row reads as its verdict.
    shown = round(value, 2)
    return shown <= limit if m.group(1) == "<=" else shown >= limit


def evaluate(t: dict, results: str) -> dict:
    found = find_evidence(t, results)
    if found is None:
        return {"measured": False}
    folder, files, k = found
    points: dict[tuple, list[tuple[float, float, float]]] = {}
    for f in files:
        rows = [r for r in read_rows(os.path.join(results, f), t) if selected(r, t)]
        for r in rows:
            v = metric(r, t["metric"])
            if v is None:
                continue
            key = (r["op"], r["type"], r["ranks"], r["bytes"])
            points.setdefault(key, []).append((v, r.get("aperture_us", 0.0), baseline_us(r, t["metric"])))
    if not points:
        return {"measured": False}
    med = {key: tuple(statistics.median(x[i] for x in vals) for i in range(3)) for key, vals in points.items()}
    # Runs of one measurement: the most any point has (files of other rank counts add points, not runs).
    runs = max(len(vals) for vals in points.values())
    values = [v[0] for v in med.values()]
    missed = sum(1 for v in values if not check_bound(v, t["bound"]))
    date, machine = FOLDER.match(folder).groups()
    return {
        "measured": True, "folder": folder, "files": files, "runs": runs, "fallback": k > 0,
        "date": date, "machine": machine, "lo": min(values), "hi": max(values),
        "ap": (min(v[1] for v in med.values()), max(v[1] for v in med.values())),
        "base": (min(v[2] for v in med.values()), max(v[2] for v in med.values())),
        "points": len(values), "missed": missed,
    }


# ------------------------------------------------------------------------------------- writing
def evidence_cell(e: dict) -> str:
    files = e["files"]
    if len(files) == 1:
        name = os.path.basename(files[0])
    else:
        stems = sorted({re.sub(r"run\d+", "run*", os.path.basename(f)) for f in files})
        name = ", ".join(stems)
    return f"[{name}](../bench/results/{e['folder']}/)"


def row_cells(t: dict, e: dict) -> list[str]:
    target = f"{t['what']}: {t['metric_text']} {t['bound'].strip()}"
    if not e["measured"]:
        return [t["id"], target, "-", t["baseline"], "-", "-", "-", f"**not measured**: {t['not_measured']}"]
    is_time = t["metric"].startswith("time")
    unit = (lambda x: f"{x:.2f}x") if is_time else (lambda x: f"{x:.2f}")
    ratio = fmt_range(e["lo"], e["hi"], unit)
    if e["runs"] > 1:
        ratio += f" (median of {e['runs']} runs)"
    if t["metric"] == "value":
        figure, base = ratio, t["baseline"]
    else:
        figure = fmt_range(*e["ap"], fmt_us)
        base = f"{t['baseline']}: {fmt_range(*e['base'], fmt_us)}"
    verdict = "**met**" if e["missed"] == 0 else f"**not met** ({e['missed']} of {e['points']} points)"
    note = t.get("fallback_note", "") if e["fallback"] else ""
    if t.get("note"):
        note = (note + "; " if note else "") + t["note"]
    if note:
        verdict += f"; {note}"
    return [t["id"], target, figure, base, ratio, f"{e['date']}, {e['machine']}", evidence_cell(e), verdict]


def load_spec(path: str) -> list[dict]:
    with open(path, "rb") as f:
        spec = tomllib.load(f)
    targets = spec.get("target", [])
    need = ("id", "what", "metric", "bound", "baseline", "evidence", "not_measured")
    seen = set()
    for t in targets:
        for key in need:
            if key not in t:
                raise SpecError(f"{path}: target {t.get('id', '?')!r} has no `{key}`")
        if t["id"] in seen:
            raise SpecError(f"{path}: target id {t['id']!r} twice")
        seen.add(t["id"])
        t.setdefault("metric_text", {
            "time": "time ratio", "time2": "time ratio", "time_best": "time ratio",
            "bw_best": "bandwidth ratio", "bw2": "bandwidth ratio", "value": "figure"}[t["metric"]])
    return targets


def make_table(spec: str, results: str) -> str:
    header = ["id", "target", "aperture", "baseline", "ratio", "date, machine", "evidence", "verdict"]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    for t in load_spec(spec):
        cells = row_cells(t, evaluate(t, results))
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def replace_section(doc: str, table: str, doc_path: str) -> str:
    if doc.count(BEGIN) != 1 or doc.count(END) != 1 or doc.index(BEGIN) > doc.index(END):
        raise SpecError(f"{doc_path}: needs one line\n  {BEGIN}\nand after it one line\n  {END}")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + "\n" + table + END + tail


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spec", default=os.path.join(ROOT, "bench", "targets.toml"))
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "PERFORMANCE.md"))
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="fail if the doc's table is not what the files give")
    mode.add_argument("--print", action="store_true", help="print the table, change nothing")
    args = ap.parse_args(argv)
    try:
        table = make_table(args.spec, args.results)
        if args.print:
            sys.stdout.write(table)
            return 0
        with open(args.doc) as f:
            doc = f.read()
        new = replace_section(doc, table, args.doc)
    except (SpecError, OSError, tomllib.TOMLDecodeError, KeyError, ValueError) as e:
        print(f"perf-table: {e}", file=sys.stderr)
        return 2
    if args.check:
        if new == doc:
            print(f"perf-table: {os.path.relpath(args.doc, ROOT)} matches bench/targets.toml and bench/results")
            return 0
        sys.stderr.writelines(difflib.unified_diff(doc.splitlines(True), new.splitlines(True),
                                                   "committed", "from the files"))
        print("perf-table: the table differs from what the committed files give; "
              "run `python3 scripts/perf-table.py` (and commit the evidence behind any figure)", file=sys.stderr)
        return 1
    if new != doc:
        with open(args.doc, "w") as f:
            f.write(new)
        print(f"perf-table: wrote the table in {os.path.relpath(args.doc, ROOT)}")
    else:
        print("perf-table: the table is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
