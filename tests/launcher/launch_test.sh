#!/usr/bin/env bash
# launch_test.sh APERTURE: the launcher's contract, end to end.
#   - rank-prefixed output and exit 0 when every rank succeeds;
#   - fail-fast: a rank exiting non-zero or killed by a signal ends the job quickly, the launcher
#     names the rank and its status or signal, exits non-zero, and leaves no process behind;
#   - --timeout ends a hanging job; misuse is refused with a clear message and exit status 2;
#   - a rank exiting 77 (skip) neither stops the job nor hides another rank's failure.
# "No process left behind" is judged on the ranks' own PIDs: each rank writes its PID and start
# time (/proc/PID/stat field 22, which exec keeps) to $PIDS before it execs, and a leftover is a
# recorded PID that is still alive with the same start time (not a recycled PID). A self-test
# first shows that this check fails when a process is deliberately left running.
set -u
aperture=$1
failures=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PIDS=$work/pids REC=$work/record.sh
mkdir "$PIDS"
# record.sh NAME COMMAND...: records this process as NAME.<rank>, then becomes COMMAND (same PID).
cat > "$REC" <<'SCRIPT'
#!/bin/sh
echo "$$ $(awk '{print $22}' /proc/$$/stat)" > "$PIDS/$1.${APERTURE_RANK:-x}"
shift
exec "$@"
SCRIPT
chmod +x "$REC"

check() {  # check NAME CONDITION-RESULT MESSAGE
  if [ "$2" -eq 0 ]; then echo "ok   - $1"; else echo "FAIL - $1: $3"; failures=$((failures + 1)); fi
}
start_time() { awk '{print $22}' "/proc/$1/stat" 2>/dev/null; }
# The recorded processes still alive, as "PID (command)"; empty when none.
leftovers() {
  local f pid started
  for f in "$PIDS"/*; do
    [ -e "$f" ] || continue
    read -r pid started < "$f"
    if [ -n "$pid" ] && [ "$(start_time "$pid")" = "$started" ]; then
      echo "$pid ($(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null))"
    fi
  done
}
recorded() { ls "$PIDS" | wc -l; }
# Shell text that waits (at most 10 s) until N processes have recorded themselves, so that a
# failing rank fails only once every other rank is tracked.
await() { echo 'i=0; while [ "$(ls "$PIDS" | wc -l)" -lt '"$1"' ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done'; }

# 0. self-test: a process left running on purpose is reported by the check, and only while alive
sleep 60 & leaked=$!
echo "$leaked $(start_time $leaked)" > "$PIDS/leaked"
[ -n "$(leftovers)" ]; check "self-test: a deliberately leaked process is reported" $? "leftovers() saw nothing of pid $leaked"
kill $leaked; wait $leaked 2>/dev/null
[ -z "$(leftovers)" ]; check "self-test: a process that ended is not reported" $? "$(leftovers)"
rm -f "$PIDS"/*

# 1. success, with the rank prefix on every line
out=$("$aperture" launch -n 4 -- sh -c 'echo "hello from $APERTURE_RANK of $APERTURE_WORLD_SIZE"' 2>&1); rc=$?
check "all ranks succeed: exit 0" $rc "exit $rc, output: $out"
for r in 0 1 2 3; do
  echo "$out" | grep -q "^\[rank $r\] hello from $r of 4$"; check "rank $r's line is prefixed" $? "$out"
done

# 2. fail-fast on a non-zero exit: the others sleep 60 s, the job must end within 15 s
start=$(date +%s)
out=$("$aperture" launch -n 4 -- "$REC" rank sh -c "if [ \$APERTURE_RANK = 2 ]; then $(await 4); exit 3; fi; exec sleep 60" 2>&1); rc=$?
elapsed=$(( $(date +%s) - start ))
[ $rc -eq 3 ]; check "failing rank: its exit status 3 is the job's" $? "exit $rc"
[ $elapsed -lt 15 ]; check "failing rank: job ends quickly" $? "took ${elapsed}s"
echo "$out" | grep -q "rank 2.*status 3"; check "failing rank named with its status" $? "$out"
[ "$(recorded)" -eq 4 ]; check "failing rank: all 4 ranks were tracked" $? "$(recorded) recorded"
sleep 0.5; [ -z "$(leftovers)" ]; check "failing rank: no process left behind" $? "$(leftovers)"
rm -f "$PIDS"/*

# 3. a rank killed by SIGKILL
out=$("$aperture" launch -n 3 -- "$REC" rank sh -c "if [ \$APERTURE_RANK = 1 ]; then $(await 3); kill -9 \$\$; fi; exec sleep 60" 2>&1); rc=$?
[ $rc -eq 137 ]; check "killed rank: exit 128 + 9" $? "exit $rc"
echo "$out" | grep -q "rank 1.*signal 9"; check "killed rank named with its signal" $? "$out"
[ "$(recorded)" -eq 3 ]; check "killed rank: all 3 ranks were tracked" $? "$(recorded) recorded"
sleep 0.5; [ -z "$(leftovers)" ]; check "killed rank: no process left behind" $? "$(leftovers)"
rm -f "$PIDS"/*

# 4. --timeout ends a job that hangs
start=$(date +%s)
out=$("$aperture" launch -n 2 --timeout 2 -- "$REC" rank sleep 60 2>&1); rc=$?
elapsed=$(( $(date +%s) - start ))
[ $rc -eq 124 ]; check "timeout: exit 124" $? "exit $rc"
[ $elapsed -lt 10 ]; check "timeout: job ends near its limit" $? "took ${elapsed}s"
echo "$out" | grep -qi "timeout\|timed out"; check "timeout: says so" $? "$out"
[ "$(recorded)" -eq 2 ]; check "timeout: both ranks were tracked" $? "$(recorded) recorded"
sleep 0.5; [ -z "$(leftovers)" ]; check "timeout: no process left behind" $? "$(leftovers)"
rm -f "$PIDS"/*

# 4b. a rank that leaves a child of its own behind (in the job's process group): the launcher
# kills it at the end, and the check sees it gone (the child records itself too)
out=$("$aperture" launch -n 2 -- "$REC" rank sh -c "\"\$REC\" child sleep 60 & $(await 4); exit 0" 2>&1); rc=$?
[ "$(recorded)" -eq 4 ]; check "leaked child: 2 ranks and their 2 children were tracked" $? "$(recorded) recorded: $out"
sleep 0.5; [ -z "$(leftovers)" ]; check "leaked child: the launcher killed it, nothing left behind" $? "$(leftovers)"
rm -f "$PIDS"/*

# 4c. skips (exit 77): every rank skips -> 77; skips and successes -> 77, naming the ranks that
# skipped; a skip never hides a failure, before or after it
out=$("$aperture" launch -n 3 -- sh -c 'exit 77' 2>&1); rc=$?
[ $rc -eq 77 ]; check "every rank skips: exit 77" $? "exit $rc, output: $out"
out=$("$aperture" launch -n 3 -- sh -c '[ $APERTURE_RANK = 1 ] && exit 77; exit 0' 2>&1); rc=$?
[ $rc -eq 77 ]; check "one rank skips, the others succeed: exit 77" $? "exit $rc, output: $out"
echo "$out" | grep -q "rank 1 of 3 skipped"; check "the skipping rank is named" $? "$out"
out=$("$aperture" launch -n 2 -- sh -c '[ $APERTURE_RANK = 0 ] && exit 77; sleep 0.5; kill -SEGV $$' 2>&1); rc=$?
[ $rc -eq 139 ]; check "a skip first, then another rank's crash: the crash is the job's status (139)" $? "exit $rc, output: $out"
echo "$out" | grep -q "rank 1.*SIGSEGV\|rank 1.*signal 11"; check "the crashing rank is named" $? "$out"
out=$("$aperture" launch -n 2 -- sh -c '[ $APERTURE_RANK = 0 ] && exit 77; sleep 0.5; exit 5' 2>&1); rc=$?
[ $rc -eq 5 ]; check "a skip first, then another rank's failure: exit 5" $? "exit $rc, output: $out"
out=$("$aperture" launch -n 2 -- sh -c '[ $APERTURE_RANK = 0 ] && exit 6; sleep 0.5; exit 77' 2>&1); rc=$?
[ $rc -eq 6 ]; check "a failure first, then a skip: exit 6" $? "exit $rc, output: $out"

# 5. misuse: exit status 2 and a message naming the problem
not_executable=$(mktemp); chmod 600 "$not_executable"
for args in "-n 0 -- true" "-n abc -- true" "-n 2" "-n 2 --" "-n 2 -- /nonexistent/program" "-n 2 -- $not_executable" \
    "--iris -n 2 -- true"; do
  out=$("$aperture" launch $args 2>&1); rc=$?
  [ $rc -eq 2 ] && [ -n "$out" ]; check "misuse 'launch $args': exit 2 with a message" $? "exit $rc, output: $out"
done

rm -f "$not_executable"

# 6. --iris: `python prog.py` runs as `python -m aperture.iris prog.py` (a stand-in interpreter shows its argv)
fake_bin=$(mktemp -d); printf '#!/bin/sh\necho "argv: $*"\n' > "$fake_bin/python3"; chmod +x "$fake_bin/python3"
out=$("$aperture" launch --iris -n 2 -- "$fake_bin/python3" prog.py --x 1 2>&1); rc=$?
[ $rc -eq 0 ]; check "--iris: exit 0" $rc "exit $rc, output: $out"
[ "$(echo "$out" | grep -c 'argv: -m aperture.iris prog.py --x 1$')" -eq 2 ]
check "--iris: every rank runs python -m aperture.iris with the program's arguments" $? "$out"
rm -rf "$fake_bin"

# 7. OMP_NUM_THREADS: ranks sharing the machine share its CPUs evenly (at least 1 each); one rank
# alone, or a value the user set, is left as it is. nproc counts the affinity mask, as the launcher
# does, once the variables nproc itself honours are unset.
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
show_threads='echo "threads=${OMP_NUM_THREADS-unset}"'
for n in 2 3; do
  want=$(( cpus / n > 0 ? cpus / n : 1 ))
  out=$(env -u OMP_NUM_THREADS "$aperture" launch -n $n -- sh -c "$show_threads" 2>&1)
  [ "$(echo "$out" | grep -c "threads=$want\$")" -eq $n ]
  check "-n $n on $cpus CPUs: OMP_NUM_THREADS=$want in every rank" $? "$out"
done
out=$(env -u OMP_NUM_THREADS "$aperture" launch -n 1 -- sh -c "$show_threads" 2>&1)
echo "$out" | grep -q "threads=unset$"; check "-n 1: OMP_NUM_THREADS stays unset" $? "$out"
out=$(OMP_NUM_THREADS=7,2 "$aperture" launch -n 2 -- sh -c "$show_threads" 2>&1)
[ "$(echo "$out" | grep -c 'threads=7,2$')" -eq 2 ]; check "-n 2: the user's OMP_NUM_THREADS is kept" $? "$out"
out=$(env -u OMP_NUM_THREADS taskset -c 0 "$aperture" launch -n 2 -- sh -c "$show_threads" 2>&1)
[ "$(echo "$out" | grep -c 'threads=1$')" -eq 2 ]; check "-n 2 under taskset -c 0: 1 thread each" $? "$out"
# Under --mpi the rank shim sets it from mpirun's local size (where Open MPI is installed, as in CI).
if command -v mpirun >/dev/null 2>&1; then
  want=$(( cpus / 2 > 0 ? cpus / 2 : 1 ))
  out=$(env -u OMP_NUM_THREADS "$aperture" launch --mpi -n 2 -- sh -c "$show_threads" 2>&1)
  [ "$(echo "$out" | grep -c "threads=$want\$")" -eq 2 ]; check "--mpi -n 2: OMP_NUM_THREADS=$want in every rank" $? "$out"
  out=$(OMP_NUM_THREADS=3 "$aperture" launch --mpi -n 2 -- sh -c "$show_threads" 2>&1)
  [ "$(echo "$out" | grep -c 'threads=3$')" -eq 2 ]; check "--mpi -n 2: the user's OMP_NUM_THREADS is kept" $? "$out"
else
  echo "note - no mpirun on PATH: the --mpi checks of OMP_NUM_THREADS did not run"
fi

if [ $failures -ne 0 ]; then echo "$failures launcher check(s) failed"; exit 1; fi
echo "all launcher checks passed"
