#!/usr/bin/env bash
# Session 52: torch's OpenMP threads in processes side by side on the GPU machine's CPUs: the probe
# (omp_probe.py) alone, then four torch probes and one Python probe side by side, with
# OMP_NUM_THREADS unset (torch takes every CPU) and at a quarter of the CPUs each; twice.
cd "$(dirname "$0")"  # ran as .deps/call52.sh beside .deps/omp_probe.py
cpus=$(nproc); share=$(( cpus / 4 > 0 ? cpus / 4 : 1 )); echo "CPUs: $cpus"
side() { for i in 1 2 3 4; do python3 omp_probe.py torch & done; python3 omp_probe.py python & wait; }
for round in 1 2; do
  echo "== round $round: alone"; python3 omp_probe.py torch; python3 omp_probe.py python
  echo "== round $round: side by side, OMP_NUM_THREADS unset"; (unset OMP_NUM_THREADS; side)
  echo "== round $round: side by side, OMP_NUM_THREADS=$share"; (export OMP_NUM_THREADS=$share; side)
done
