#!/usr/bin/env bash
# tests/multinode/collective_kill_test.sh LAUNCHER COLLECTIVE_FAULT [RANKS [TIMEOUT [WITHIN]]] — a
# node lost in the middle of collectives across nodes: an MPI job of RANKS ranks (default 4) as 2
# nodes split on this machine (aperture launch --mpi --nodes 2); once every rank runs collectives,
# every rank of node 1 (the second half) gets SIGKILL. Checks that each survivor (node 0's ranks)
# errors naming a lost rank and then tears down without waiting for the lost node, that the job
# ends non-zero within WITHIN seconds of the kill (default: APERTURE_TIMEOUT, which the script sets
# to TIMEOUT, default 20), and that no process or /dev/shm file of the job is left. The GPU build
# of the program (tests/gpu) runs with RANKS 2 (two ranks sharing GPU 0 as two nodes) and 4 (two
# per node, node 1 stopped first: APERTURE_TEST_NODE1_STOPS, collective_fault.cpp).
#
# mpirun SIGKILLs the survivors a grace period after it saw a rank die (Open MPI's
# odls_base_sigkill_timeout, 1 s by default): a survivor that has not reported by then says
# nothing and the test fails. APERTURE_TEST_KILL_GRACE=S sets that period for this job (default:
# mpirun's own); the bound WITHIN holds either way. The output gives each survivor's report and
# teardown in milliseconds after the kill.
set -uo pipefail
launcher="$1" program="$2" ranks="${3:-4}" timeout="${4:-20}" within="${5:-${4:-20}}"
(( ranks >= 2 && ranks % 2 == 0 )) || { echo "FAIL: RANKS must be even and at least 2, not '$ranks'"; exit 1; }
(( within <= timeout )) || { echo "FAIL: WITHIN ($within) must not exceed TIMEOUT ($timeout)"; exit 1; }
per_node=$((ranks / 2))
# The job's output, with the frames of the stacks a stuck survivor printed (collective_fault.cpp)
# named by addr2line where it can: the libraries export few symbols.
show_log() {
  local line where
  while IFS= read -r line; do
    where=""
    if [[ $line =~ ([^][ \(]+)\(\+(0x[0-9a-f]+)\) ]] && command -v addr2line >/dev/null; then
      where="$(addr2line -f -C -e "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" 2>/dev/null | paste -sd ' ')"
    fi
    echo "$line${where:+  <- $where}"
  done <"$log"
}
fail() { echo "FAIL: $*"; echo "--- job output"; show_log; exit 1; }
export APERTURE_TIMEOUT="$timeout" APERTURE_HEAP_SIZE=64M
[[ -n ${APERTURE_TEST_KILL_GRACE:-} ]] && export OMPI_MCA_odls_base_sigkill_timeout="$APERTURE_TEST_KILL_GRACE"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
before_shm="$(ls /dev/shm | sort)"
"$launcher" launch --mpi --nodes 2 -n "$ranks" --timeout 120 -- "$program" >"$log" 2>&1 &
job=$!
for _ in $(seq 600); do
  [[ $(grep -c "collective-fault ready" "$log") == "$ranks" ]] && break
  sleep 0.1
done
[[ $(grep -c "collective-fault ready" "$log") == "$ranks" ]] || fail "the ranks did not all start"
sleep 0.5  # mid-collective
pids="$(sed -n 's/.*collective-fault ready (rank [0-9]*, node 1, pid \([0-9]*\)).*/\1/p' "$log")"
[[ $(wc -w <<<"$pids") == "$per_node" ]] || fail "node 1's ranks not found"
survivors="$(sed -n 's/.*collective-fault ready (rank [0-9]*, node 0, pid \([0-9]*\)).*/\1/p' "$log")"
# The job's Open MPI id (hex), which names its files in /dev/shm (vader_segment.<host>.0.<id>.<rank>):
# the check at the end counts only this job's files, as other tests' MPI jobs may run meanwhile.
jobid="$(tr '\0' '\n' 2>/dev/null </proc/"$(head -1 <<<"$survivors")"/environ | sed -n 's/^OMPI_MCA_ess_base_jobid=//p')"
[[ $jobid =~ ^[0-9]+$ ]] || fail "no OMPI_MCA_ess_base_jobid in survivor $(head -1 <<<"$survivors")'s environment"
jobid_hex="$(printf '%x' "$jobid")"
killed_at=$SECONDS
killed_ms=$(date +%s%3N)
kill -KILL $pids
# A survivor that has not reported APERTURE_TEST_STACKS_AFTER_MS later prints its threads' stacks
# (SIGUSR2: collective_fault.cpp), within mpirun's grace where the GPU runs set it to 5 s.
( sleep "$(( ${APERTURE_TEST_STACKS_AFTER_MS:-2000} / 1000 )).$(( ${APERTURE_TEST_STACKS_AFTER_MS:-2000} % 1000 / 100 ))"
  kill -USR2 $survivors 2>/dev/null ) &
asker=$!
wait "$job"
status=$?
took=$((SECONDS - killed_at))
kill "$asker" 2>/dev/null; wait "$asker" 2>/dev/null
[[ $status != 0 ]] || fail "the launcher exited 0 after a node was lost"
(( took < within )) || fail "the job took $took s to end, not less than $within s (APERTURE_TIMEOUT=$APERTURE_TIMEOUT)"
# "[T ms]" of rank R's line of KIND (ok, teardown) as milliseconds after the kill, or "-".
after_kill() {
  local t
  t="$(sed -n "s/^\[rank $1\] collective-fault $2 .*(rank $1) \[\([0-9]*\) ms\].*/\1/p" "$log" | head -1)"
  [[ -n $t ]] && echo $((t - killed_ms)) || echo -
}
timings=""
for ((r = 0; r < per_node; ++r)); do timings+=" rank $r: reported $(after_kill $r ok) ms, torn down $(after_kill $r teardown) ms;"; done
echo "after the kill:${timings%;}"
for ((r = 0; r < per_node; ++r)); do
  grep -q "^\[rank $r\] collective-fault ok (rank $r)" "$log" || fail "survivor rank $r did not report an error naming a lost rank"
  grep -q "^\[rank $r\] collective-fault teardown done (rank $r)" "$log" ||
    fail "survivor rank $r did not finish its teardown (a close that waited for the lost node?)"
done
# This job's ranks only: the other node-kill test runs the same program, maybe at the same time.
left=""
for pid in $survivors $pids; do [[ -d /proc/$pid ]] && left+=" $pid"; done
[[ -z $left ]] || fail "processes of the job left:$left"
sleep 0.5
# Only files that appeared and are this job's count (its MPI id, or aperture's own names): other
# jobs on the machine may add or remove theirs meanwhile.
left_shm="$(comm -13 <(echo "$before_shm") <(ls /dev/shm | sort) | grep -E "[.]$jobid_hex[.]|aperture" || true)"
[[ -z $left_shm ]] || fail "/dev/shm files left: $left_shm"
echo "PASS: node 1 killed mid-collective; survivors errored and the job ended in $took s (bound $within s, APERTURE_TIMEOUT=$APERTURE_TIMEOUT)"
grep -E "collective-fault (ok|teardown|no report)|aperture launch:" "$log"
exit 0
