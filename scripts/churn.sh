#!/usr/bin/env bash
# scripts/churn.sh [CYCLES] [BUILD_DIR] — the churn test of tests/conformance/churn_test.cpp with
# many cycles (default 2000) on every host provider: shm under `aperture launch`, mpi-window and
# openshmem under `aperture launch --mpi`, 4 ranks each (CHURN_RANKS). mpi-window runs
# CHURN_MPI_WINDOW_CYCLES (default 700): Open MPI makes a file and mappings per window, about
# 0.1 s a cycle on a 2-core machine. Each run allocates and
# frees CYCLES times with several allocations live, writes and checks every one through its
# table, and fails when the process ends with more mappings or descriptors than after its first
# rounds. Prints the figures (`churn: ...`) of docs/RELIABILITY.md. BUILD_DIR (default build/)
# must hold a build with tests (scripts/build.sh).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cycles="${1:-2000}"
build="${2:-$root/build}"
ranks="${CHURN_RANKS:-4}"
aperture="$build/tools/aperture"
conformance="$build/tests/conformance/conformance_tests"
export APERTURE_HEAP_SIZE="${APERTURE_HEAP_SIZE:-256M}" APERTURE_TIMEOUT=60
export SHMEM_SYMMETRIC_HEAP_SIZE="${SHMEM_SYMMETRIC_HEAP_SIZE:-256M}"
status=0
for provider in shm mpi-window openshmem; do
  mode=()
  [[ $provider != shm ]] && mode=(--mpi)
  n=$cycles
  [[ $provider == mpi-window ]] && n="${CHURN_MPI_WINDOW_CYCLES:-700}"
  began=$SECONDS
  log=$(mktemp)
  if APERTURE_CHURN_CYCLES=$n "$aperture" launch "${mode[@]}" -n "$ranks" --timeout 300 -- "$conformance" \
       "--gtest_filter=Conformance/ChurnTest.*/${provider//-/_}" >"$log" 2>&1 &&
     grep -q "churn: $provider " "$log"; then
    echo "churn: $provider passed in $((SECONDS - began)) s"
  else
    echo "churn: $provider FAILED after $((SECONDS - began)) s; last lines:"
    tail -n 30 "$log"
    status=1
  fi
  grep -ho "churn: $provider .*" "$log" || true
  rm -f "$log"
done
exit "$status"
