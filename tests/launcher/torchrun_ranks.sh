#!/usr/bin/env bash
# torchrun_ranks.sh N PROGRAM ARGS...: starts N ranks the way torchrun does (RANK, WORLD_SIZE,
# LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and succeeds when every rank that was not killed by a
# signal exited 0. Used to test Team over TCP and what survivors see when a rank dies.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/../common/tcp_ports.sh"
n=$1; shift
port=$(free_tcp_ports 2) || exit 1
pids=()
for ((r = 0; r < n; r++)); do
  RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" &
  pids+=($!)
done
status=0
for ((r = 0; r < n; r++)); do
  wait "${pids[$r]}"; rc=$?
  if (( rc > 128 )); then
    echo "rank $r was killed by signal $((rc - 128)) (expected only for the rank the test kills)"
  elif (( rc != 0 )); then
    echo "rank $r exited with status $rc"; status=1
  fi
done
exit $status
