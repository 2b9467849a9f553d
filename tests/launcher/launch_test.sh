#!/usr/bin/env bash
# launch_test.sh APERTURE: the launcher's contract, end to end.
#   - rank-prefixed output and exit 0 when every rank succeeds;
#   - fail-fast: a rank exiting non-zero or killed by a signal ends the job quickly, the launcher
#     names the rank and its status or signal, exits non-zero, and leaves no process behind;
#   - --timeout ends a hanging job; misuse is refused with a clear message and exit status 2.
set -u
aperture=$1
failures=0
marker="aperture-launch-test-$$-$RANDOM"   # in every child's command line, to find leftovers

check() {  # check NAME CONDITION-RESULT MESSAGE
  if [ "$2" -eq 0 ]; then echo "ok   - $1"; else echo "FAIL - $1: $3"; failures=$((failures + 1)); fi
}
leftovers() { pgrep -f "$marker" | grep -v "^$$\$" || true; }

# 1. success, with the rank prefix on every line
out=$("$aperture" launch -n 4 -- sh -c 'echo "hello from $APERTURE_RANK of $APERTURE_WORLD_SIZE"' 2>&1); rc=$?
check "all ranks succeed: exit 0" $rc "exit $rc, output: $out"
for r in 0 1 2 3; do
  echo "$out" | grep -q "^\[rank $r\] hello from $r of 4$"; check "rank $r's line is prefixed" $? "$out"
done

# 2. fail-fast on a non-zero exit: the others sleep 60 s, the job must end within 15 s
start=$(date +%s)
out=$("$aperture" launch -n 4 -- sh -c "if [ \$APERTURE_RANK = 2 ]; then exit 3; fi; exec sleep 60 # $marker" 2>&1); rc=$?
elapsed=$(( $(date +%s) - start ))
[ $rc -ne 0 ]; check "failing rank: non-zero exit" $? "exit $rc"
[ $elapsed -lt 15 ]; check "failing rank: job ends quickly" $? "took ${elapsed}s"
echo "$out" | grep -q "rank 2.*status 3"; check "failing rank named with its status" $? "$out"
sleep 0.5; [ -z "$(leftovers)" ]; check "failing rank: no process left behind" $? "$(leftovers)"

# 3. a rank killed by SIGKILL
out=$("$aperture" launch -n 3 -- sh -c "if [ \$APERTURE_RANK = 1 ]; then kill -9 \$\$; fi; exec sleep 60 # $marker" 2>&1); rc=$?
[ $rc -ne 0 ]; check "killed rank: non-zero exit" $? "exit $rc"
echo "$out" | grep -q "rank 1.*signal 9"; check "killed rank named with its signal" $? "$out"
sleep 0.5; [ -z "$(leftovers)" ]; check "killed rank: no process left behind" $? "$(leftovers)"

# 4. --timeout ends a job that hangs
start=$(date +%s)
out=$("$aperture" launch -n 2 --timeout 2 -- sh -c "exec sleep 60 # $marker" 2>&1); rc=$?
elapsed=$(( $(date +%s) - start ))
[ $rc -ne 0 ]; check "timeout: non-zero exit" $? "exit $rc"
[ $elapsed -lt 10 ]; check "timeout: job ends near its limit" $? "took ${elapsed}s"
echo "$out" | grep -qi "timeout\|timed out"; check "timeout: says so" $? "$out"
sleep 0.5; [ -z "$(leftovers)" ]; check "timeout: no process left behind" $? "$(leftovers)"

# 5. misuse: exit status 2 and a message naming the problem
not_executable=$(mktemp); chmod 600 "$not_executable"
for args in "-n 0 -- true" "-n abc -- true" "-n 2" "-n 2 --" "-n 2 -- /nonexistent/program" "-n 2 -- $not_executable"; do
  out=$("$aperture" launch $args 2>&1); rc=$?
  [ $rc -eq 2 ] && [ -n "$out" ]; check "misuse 'launch $args': exit 2 with a message" $? "exit $rc, output: $out"
done

rm -f "$not_executable"

if [ $failures -ne 0 ]; then echo "$failures launcher check(s) failed"; exit 1; fi
echo "all launcher checks passed"
