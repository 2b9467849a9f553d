#!/usr/bin/env bash
# scripts/soak.sh [RANKS] [BUILD_DIR] — the soak of tests/soak/soak.cpp: RANKS (default 8) CPU
# ranks run random operations at random sizes (RMA put/get/load/store, every atomic, a signal
# ring, every collective), every result checked, for SOAK_SECONDS (default 120) from SOAK_SEED
# (default 1), on SOAK_PROVIDER (default shm; mpi-window and openshmem run under --mpi). Fails
# on any wrong value or when the ranks end with more mappings or descriptors than after the
# first steps. Prints the figures (`soak: ...`) of docs/RELIABILITY.md.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ranks="${1:-8}"
build="${2:-$root/build}"
provider="${SOAK_PROVIDER:-shm}"
seconds="${SOAK_SECONDS:-120}"
mode=()
[[ $provider != shm ]] && mode=(--mpi)
export SOAK_SECONDS="$seconds" APERTURE_HEAP_SIZE="${APERTURE_HEAP_SIZE:-256M}" APERTURE_TIMEOUT=60
exec "$build/tools/aperture" launch "${mode[@]}" -n "$ranks" --timeout $((seconds + 120)) -- \
  "$build/tests/soak_test" "$provider"
