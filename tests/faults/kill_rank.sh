#!/usr/bin/env bash
# kill_rank.sh APERTURE FAULT_RANK FLAVOR MODES RANKS ITERATIONS
#
# Kills one rank with SIGKILL while a job is in each of MODES (rendezvous, allocate, barrier,
# ring, collective; comma-separated), ITERATIONS times each, the victim a random rank every time, and
# checks what everyone sees:
#   - every survivor gets an aperture::Error naming the dead rank (fault_rank prints
#     "fault-check ok"), within the time limit below: well before APERTURE_TIMEOUT, so nobody
#     waited for it, not even a rank blocked on a flag in the ring;
#   - FLAVOR=launch: `aperture launch` exits non-zero naming the rank and its signal;
#     FLAVOR=torchrun: the ranks are started by this script with torchrun's variables (the
#     TCP hub runs in rank 0, which may itself be the victim);
#   - no process of the job is left, the hub's socket is gone, and no new file is in /dev/shm
#     (the shm provider uses memfd: it never has one). With FAULTS_STRICT=1 (the serial CI
#     stage) any new /dev/shm entry counts; otherwise only names containing "aperture", since
#     other tests running alongside may create their own.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/../common/tcp_ports.sh"
aperture=$1 fault_rank=$2 flavor=$3 modes=$4 ranks=$5 iterations=$6
marker="aperture-fault-$$-$RANDOM"
failures=0
runs=0
unstarted=0
export APERTURE_HEAP_SIZE=${APERTURE_HEAP_SIZE:-64M}
export APERTURE_TEST_EXPECTED_RANKS=$ranks  # fault_rank fails a team of any other size

fail() { echo "FAIL - $*"; failures=$((failures + 1)); }
leftovers() { pgrep -f "$marker" | grep -v "^$$\$" || true; }
shm_listing() {
  if [[ "${FAULTS_STRICT:-0}" == 1 ]]; then ls -1 /dev/shm 2>/dev/null | sort; else ls -1 /dev/shm 2>/dev/null | grep -i aperture | sort; fi
}
new_shm_entries() {  # new_shm_entries BEFORE AFTER: entries of AFTER not in BEFORE (others' removals do not count)
  comm -13 <(echo "$1") <(echo "$2") | grep -v '^$' || true
}

# APERTURE_TIMEOUT per mode. The hub notices a death at once and tells every rank, even one
# blocked on a flag (the job watch of host waits), so the timeout is long and the limits below
# prove nobody waited for it. Only a rank that died before it connected can be told from a slow
# one by the timeout alone (torchrun-style; the launcher reports it at once): short there.
timeout_for() {
  case "$1" in
    rendezvous) echo 2 ;;
    *) echo 30 ;;
  esac
}
limit_ms() {  # the most a job of MODE may take
  case "$1" in
    rendezvous) echo 12000 ;;
    *) echo 8000 ;;
  esac
}

run_launch() {  # run_launch MODE VICTIM
  local mode=$1 victim=$2 before after out rc start elapsed hub
  before=$(shm_listing)
  start=$(date +%s%N)
  local started
  started=$(mktemp -d)  # every rank marks its start there; the victim waits for all of them
  out=$(APERTURE_FAULT_START_DIR=$started APERTURE_TIMEOUT=$(timeout_for "$mode") timeout 60 "$aperture" launch -n "$ranks" -- "$fault_rank" "$mode" "$victim" "$marker" 2>&1)
  rc=$?
  rm -rf "$started"
  elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
  local what="launch $mode, $ranks ranks, victim $victim"
  [[ $rc -ne 0 && $rc -ne 124 ]] || fail "$what: launcher exit $rc (expected non-zero, not a hang); output:"$'\n'"$out"
  echo "$out" | grep -Eq "rank $victim \(pid [0-9]+\).*(SIGKILL|signal 9)" || fail "$what: the launcher did not name rank $victim and SIGKILL:"$'\n'"$out"
  for ((r = 0; r < ranks; r++)); do
    [[ $r == "$victim" ]] && continue
    # The victim died only once every rank had started (APERTURE_FAULT_START_DIR): a survivor
    # that never started (it prints its hub address first thing) is a failure, not a pass.
    echo "$out" | grep -q "^\[rank $r\] fault-hub" || { unstarted=$((unstarted + 1)); fail "$what: rank $r never started:"$'\n'"$out"; continue; }
    echo "$out" | grep -q "fault-check ok ($mode, rank $r)" || fail "$what: rank $r did not report the death:"$'\n'"$out"
  done
  echo "$out" | grep -q "fault-check FAILED" && fail "$what: a survivor saw the wrong error:"$'\n'"$out"
  echo "$out" | grep -Eq "ERROR: (Leak|Address|Thread)Sanitizer|runtime error:|WARNING: ThreadSanitizer" &&
    fail "$what: a sanitizer reported (a survivor leaked or erred on its way out):"$'\n'"$out"
  (( elapsed < $(limit_ms "$mode") )) || fail "$what: took ${elapsed} ms"
  sleep 0.1
  [[ -z "$(leftovers)" ]] || fail "$what: processes left behind: $(leftovers)"
  hub=$(echo "$out" | sed -n 's/.*fault-hub unix:@\([A-Za-z0-9-]*\).*/\1/p' | head -1)
  [[ -n "$hub" ]] || fail "$what: no rank printed its hub address"
  if [[ -n "$hub" ]] && grep -q "@$hub" /proc/net/unix; then fail "$what: the hub's socket @$hub is still there"; fi
  after=$(shm_listing)
  [[ -z "$(new_shm_entries "$before" "$after")" ]] || fail "$what: new in /dev/shm: $(new_shm_entries "$before" "$after")"
  runs=$((runs + 1))
}

run_torchrun() {  # run_torchrun MODE VICTIM
  local mode=$1 victim=$2 before after start elapsed port dir r rc
  local what="torchrun $mode, $ranks ranks, victim $victim"
  before=$(shm_listing)
  port=$(free_tcp_ports 2) || { fail "$what: no free TCP port"; return; }
  dir=$(mktemp -d)
  mkdir "$dir/started"
  local pids=()
  start=$(date +%s%N)
  # Each rank in a subshell that exits with the rank's status: the job bash watches then ends
  # normally, and bash prints no "Killed" notice of its own for the victim.
  for ((r = 0; r < ranks; r++)); do
    (
      RANK=$r WORLD_SIZE=$ranks LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port APERTURE_FAULT_START_DIR=$dir/started \
        APERTURE_TIMEOUT=$(timeout_for "$mode") timeout 60 "$fault_rank" "$mode" "$victim" "$marker" >"$dir/$r" 2>&1
      status=$?
      exit $status
    ) 2>/dev/null &  # (the subshell's own notice of the victim's death goes nowhere)
    pids+=($!)
  done
  for ((r = 0; r < ranks; r++)); do
    wait "${pids[$r]}"; rc=$?
    if [[ $r == "$victim" ]]; then
      [[ $rc == 137 ]] || fail "$what: the victim exited $rc, not by SIGKILL: $(cat "$dir/$r")"
    else
      [[ $rc == 0 ]] && grep -q "fault-check ok ($mode, rank $r)" "$dir/$r" ||
        fail "$what: rank $r exited $rc:"$'\n'"$(cat "$dir/$r")"
    fi
  done
  elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
  (( elapsed < $(limit_ms "$mode") )) || fail "$what: took ${elapsed} ms"
  grep -El "ERROR: (Leak|Address|Thread)Sanitizer|runtime error:|WARNING: ThreadSanitizer" "$dir"/[0-9]* >/dev/null &&
    fail "$what: a sanitizer reported: $(grep -Eh -A5 "Sanitizer|runtime error" "$dir"/[0-9]* | head -20)"
  [[ -z "$(leftovers)" ]] || fail "$what: processes left behind: $(leftovers)"
  if tcp_listening $((port + 1)); then fail "$what: the hub's port $((port + 1)) is still listening"; fi
  after=$(shm_listing)
  [[ -z "$(new_shm_entries "$before" "$after")" ]] || fail "$what: new in /dev/shm: $(new_shm_entries "$before" "$after")"
  rm -rf "$dir"
  runs=$((runs + 1))
}

start_all=$(date +%s)
IFS=, read -ra mode_list <<<"$modes"
for ((i = 1; i <= iterations; i++)); do
  for mode in "${mode_list[@]}"; do
    victim=$((RANDOM % ranks))
    if [[ $flavor == launch ]]; then run_launch "$mode" "$victim"; else run_torchrun "$mode" "$victim"; fi
  done
  if (( failures > 0 )); then break; fi
done
echo "kill_rank ($flavor, $modes, $ranks ranks): $runs runs in $(( $(date +%s) - start_all )) s, $failures failure(s)" \
     "($unstarted survivor(s) never started)"
if (( failures > 0 )); then exit 1; fi
exit 0
