#!/usr/bin/env bash
# tests/multinode/node_kill_test.sh LAUNCHER NODE_FAULT — a whole simulated node killed while the
# job runs: 2 nodes x 2 ranks under `aperture launch --nodes 2`; once every rank is busy, every
# process of node 1 gets SIGKILL (the node is gone). Checks that each survivor errors naming a
# lost rank within APERTURE_TIMEOUT, that the launcher names the lost ranks and exits non-zero,
# and that no namespace, /dev/shm file or process of the job is left. Exit 77 (skipped) with the
# reason where namespaces cannot be made.
set -uo pipefail
launcher="$1" program="$2"
tool="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts" && pwd)/simnodes.sh"
if ! reason="$(bash "$tool" check)"; then  # APERTURE_SIMNODES_REQUIRE=1 (CI): cannot is a failure
  [[ ${APERTURE_SIMNODES_REQUIRE:-0} == 1 ]] && { echo "FAIL: APERTURE_SIMNODES_REQUIRE=1 and $reason"; exit 1; }
  echo "SKIP: $reason"; exit 77
fi
fail() { echo "FAIL: $*"; echo "--- job output"; cat "$log"; exit 1; }
export APERTURE_TIMEOUT=20 APERTURE_HEAP_SIZE=64M
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
bash "$tool" run 2 -- "$launcher" launch --nodes 2 -n 4 --timeout 120 -- "$program" >"$log" 2>&1 &
job=$!
for _ in $(seq 300); do
  [[ $(grep -c "node-fault ready" "$log") == 4 ]] && break
  sleep 0.1
done
[[ $(grep -c "node-fault ready" "$log") == 4 ]] || fail "the ranks did not all start"
set_name="$(sed -n 's/.*node-fault ready (rank [0-9]*, node 1, host \(ap[0-9a-f]*\)-node1).*/\1/p' "$log" | head -1)"
[[ -n $set_name ]] || fail "no rank reported node 1's host"
sleep 0.5  # mid-operation
killed_at=$SECONDS
pids="$(ip netns pids "$set_name-n1")"
[[ -n $pids ]] || fail "node 1 has no processes"
kill -KILL $pids
wait "$job"
status=$?
took=$((SECONDS - killed_at))
[[ $status != 0 ]] || fail "the launcher exited 0 after a node was lost"
(( took < APERTURE_TIMEOUT )) || fail "the job took $took s to end, not less than APERTURE_TIMEOUT=$APERTURE_TIMEOUT"
for r in 0 1; do
  grep -q "^\[rank $r\] node-fault ok (rank $r)" "$log" || fail "survivor rank $r did not report an error naming a lost rank"
done
for r in 2 3; do
  grep -Eq "aperture launch: rank $r \(pid [0-9]+\) was killed by signal 9" "$log" || fail "the launcher did not name lost rank $r"
done
# This job's set only (its namespaces and files carry the set's name): other tests' simulated
# nodes may come and go meanwhile under ctest --parallel.
ns_left="$(ip netns list | grep -F "$set_name-" || true)"
[[ -z $ns_left ]] || fail "namespaces left: $ns_left"
shm_left="$(ls /dev/shm | grep -F "$set_name" || true)"
[[ -z $shm_left ]] || fail "/dev/shm files left: $shm_left"
left="$(pgrep -x "$(basename "$program" | cut -c1-15)" || true)"  # by process name: not this script
[[ -z $left ]] || fail "processes of the job left: $left"
echo "PASS: node 1 killed; survivors errored and the job ended in $took s; nothing left"
grep -E "node-fault ok|aperture launch:" "$log"
exit 0
