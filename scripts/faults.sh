#!/usr/bin/env bash
# scripts/faults.sh [ITERATIONS] [BUILD_DIR] — the dead-rank tests, repeated: a rank is killed
# with SIGKILL during rendezvous, allocate, a barrier, a put/signal ring and running
# collectives (Communicator), ITERATIONS times
# each (default 50) under `aperture launch` and again with torchrun-style ranks (TCP hub in
# rank 0), 4 ranks, a random victim every time. Each run checks that every survivor got an
# aperture::Error naming the dead rank in time, that the launcher exits non-zero naming it, and
# that no process, socket or /dev/shm file is left (tests/faults/kill_rank.sh). BUILD_DIR
# (default build/) must hold a build with tests (scripts/build.sh). Runs alone: any new file
# in /dev/shm counts as a leak.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
iterations="${1:-50}"
build="${2:-$root/build}"
export FAULTS_STRICT=1
status=0
for flavor in launch torchrun; do
  bash "$root/tests/faults/kill_rank.sh" "$build/tools/aperture" "$build/tests/faults/fault_rank" "$flavor" \
    rendezvous,allocate,barrier,ring,collective "${FAULT_RANKS:-4}" "$iterations" || status=1
done
exit "$status"
