#!/usr/bin/env python3
"""tests/docs/perf_table_test.py — docs/PERFORMANCE.md's table is what the committed files give.

1. `scripts/perf-table.py --check` passes on the committed tree.
2. A figure edited by hand (no file behind it) fails the check.
3. A target whose evidence file is gone reads "not measured", and the check then fails.
4. The reader takes what `aperture bench --csv` writes: a CSV made here row by row gives the
   median over runs, the faster of two baselines, and the verdict against the bound.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "perf-table.py")
HEADER = ("memory,op,type,ranks,bytes,iters,aperture_us,aperture_GBps,baseline,baseline_us,baseline_GBps,"
          "time_ratio,aperture_busGBps,baseline_busGBps,baseline2,baseline2_us,baseline2_busGBps,time_ratio2\n")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def expect(cond, what, proc=None):
    if not cond:
        detail = f"\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}" if proc else ""
        print(f"FAIL: {what}{detail}")
        sys.exit(1)
    print(f"ok: {what}")


def copy_tree(tmp):
    doc = os.path.join(tmp, "PERFORMANCE.md")
    shutil.copy(os.path.join(ROOT, "docs", "PERFORMANCE.md"), doc)
    results = os.path.join(tmp, "results")
    shutil.copytree(os.path.join(ROOT, "bench", "results"), results)
    return doc, results


def main():
    p = run("--check")
    expect(p.returncode == 0, "the committed table matches bench/targets.toml and bench/results", p)

    with tempfile.TemporaryDirectory() as tmp:
        doc, results = copy_tree(tmp)
        text = open(doc).read()
        begin = text.index("<!-- perf-table:begin")
        row = text.index("| gpu.bulk.local |", begin)
        end = text.index("\n", row)
        line = text[row:end]
        edited = line.replace("1.00", "1.01", 1)  # a ratio typed by hand, no file behind it
        expect(edited != line, "a figure of the table can be edited for the test")
        open(doc, "w").write(text[:row] + edited + text[end:])
        p = run("--check", "--doc", doc, "--results", results)
        expect(p.returncode == 1, "a figure edited by hand fails the check", p)

    with tempfile.TemporaryDirectory() as tmp:
        doc, results = copy_tree(tmp)
        # Every file gpu.bulk.local's evidence patterns match, in every dated folder.
        with open(os.path.join(ROOT, "bench", "targets.toml"), "rb") as f:
            target = next(t for t in tomllib.load(f)["target"] if t["id"] == "gpu.bulk.local")
        gone = [path for pattern in target["evidence"] for path in glob.glob(os.path.join(results, pattern))]
        expect(len(gone) > 0, "gpu.bulk.local's evidence files are found")
        for path in set(gone):
            os.remove(path)
        p = run("--print", "--results", results)
        row = [ln for ln in p.stdout.splitlines() if ln.startswith("| gpu.bulk.local |")]
        expect(len(row) == 1 and "not measured" in row[0], "a row whose file is gone says not measured", p)
        p = run("--check", "--doc", doc, "--results", results)
        expect(p.returncode == 1, "and the committed table then fails the check", p)

    with tempfile.TemporaryDirectory() as tmp:
        results = os.path.join(tmp, "results")
        folder = os.path.join(results, "2031-01-02-h200-x2")
        os.makedirs(folder)
        # Three runs: per point the median (1.0, 2.0, 9.0 -> 2.0 us) against the faster baseline
        # (NCCL symmetric 4.0 us here, plain NCCL 5.0 us): 0.50x at 4 KiB; 1 MiB 1.10x, over 1.0.
        for run_no, ap in enumerate((1.0, 2.0, 9.0), 1):
            with open(os.path.join(folder, f"gpu-bench-run{run_no}.csv"), "w") as f:
                f.write(HEADER)
                f.write(f"gpu,all_reduce,bfloat16,2,4096,10,{ap},0,NCCL,5.0,0,0,0,0,NCCL symmetric,4.0,0,0\n")
                f.write("gpu,all_reduce,bfloat16,2,1048576,10,11.0,0,NCCL,10.0,0,0,0,0,NCCL symmetric,12.0,0,0\n")
        spec = os.path.join(tmp, "targets.toml")
        with open(spec, "w") as f:
            f.write('[[target]]\nid = "t.small"\nwhat = "w"\nmetric = "time_best"\nbound = "<= 0.6"\n'
                    'baseline = "b"\nevidence = ["*-h200-x2/gpu-bench*.csv"]\nop = ["all_reduce"]\n'
                    'bytes = ["1", "256K"]\nnot_measured = "n"\n'
                    '[[target]]\nid = "t.mid"\nwhat = "w"\nmetric = "time_best"\nbound = "<= 1.0"\n'
                    'baseline = "b"\nevidence = ["*-h200-x2/gpu-bench*.csv"]\nop = ["all_reduce"]\n'
                    'bytes = ["1M", "16M"]\nnot_measured = "n"\n'
                    '[[target]]\nid = "t.none"\nwhat = "w"\nmetric = "time"\nbound = "<= 1.0"\n'
                    'baseline = "b"\nevidence = ["*-h200-x8/gpu-bench*.csv"]\nnot_measured = "no 8-GPU machine"\n')
        p = run("--print", "--spec", spec, "--results", results)
        rows = {ln.split("|")[1].strip(): ln for ln in p.stdout.splitlines() if ln.startswith("| t.")}
        expect(p.returncode == 0 and len(rows) == 3, "a spec and CSVs in the bench's format are read", p)
        expect("0.50x (median of 3 runs)" in rows["t.small"] and "**met**" in rows["t.small"]
               and "2031-01-02, h200-x2" in rows["t.small"], "median over runs, the faster baseline, met", p)
        expect("1.10x" in rows["t.mid"] and "**not met** (1 of 1 points)" in rows["t.mid"],
               "a point over its bound is not met", p)
        expect("**not measured**: no 8-GPU machine" in rows["t.none"], "no file: not measured, with the reason", p)
    print("PASS perf_table_test")


if __name__ == "__main__":
    main()
