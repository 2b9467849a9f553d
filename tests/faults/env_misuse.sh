#!/usr/bin/env bash
# env_misuse.sh APERTURE TEAM_PROBE: malformed environments and launcher misuse, end to end.
# Each case starts tests/faults/team_probe (or `aperture launch`) the way a user would get it
# wrong and checks: an aperture::Error (probe exit 3) or a usage error (launcher exit 2), whose
# message names the variable or value and the fix, within a few seconds (no hang).
set -u
aperture=$1 probe=$2
failures=0 passed=0

# expect NAME EXPECTED_EXIT NEEDLE... -- COMMAND...
expect() {
  local name=$1 want=$2; shift 2
  local needles=()
  while [[ $1 != -- ]]; do needles+=("$1"); shift; done
  shift
  local start rc elapsed
  start=$(date +%s)
  out=$(timeout 30 "$@" 2>&1); rc=$?  # global: a caller may look at it
  elapsed=$(( $(date +%s) - start ))
  local ok=1
  [[ $rc == "$want" ]] || ok=0
  for needle in "${needles[@]}"; do grep -qF -- "$needle" <<<"$out" || ok=0; done
  (( elapsed <= 10 )) || ok=0
  if (( ok )); then
    passed=$((passed + 1)); echo "ok   - $name"
  else
    failures=$((failures + 1)); echo "FAIL - $name: exit $rc (want $want) after ${elapsed}s, output: $out"
  fi
}

clean=(env -u APERTURE_RANK -u APERTURE_WORLD_SIZE -u APERTURE_HUB -u APERTURE_JOB_TOKEN -u OMPI_COMM_WORLD_RANK
       -u OMPI_COMM_WORLD_SIZE -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT -u SLURM_PROCID
       -u SLURM_STEP_NUM_TASKS -u SLURM_STEP_NODELIST -u SLURMD_NODENAME -u SLURM_NTASKS -u PMIX_RANK
       -u APERTURE_MASTER_PORT -u APERTURE_NODE APERTURE_TIMEOUT=1)
torch=("${clean[@]}" MASTER_ADDR=127.0.0.1 MASTER_PORT=29500)
source "$(dirname "${BASH_SOURCE[0]}")/../common/tcp_ports.sh"
# closed_port .. + 9 free, below the ephemeral range: nobody listens on closed_port + 1 .. + 8,
# and the holder below takes held_port = closed_port + 2 .. + 9 (a port a client's connection
# took would make its bind fail and the job form where the test expects it refused).
closed_port=$(free_tcp_ports 10) || exit 1

expect "RANK=abc" 3 "RANK='abc' is not an integer" "0..65535" -- "${torch[@]}" RANK=abc WORLD_SIZE=2 "$probe"
expect "RANK=-1" 3 "RANK=-1 is out of range" -- "${torch[@]}" RANK=-1 WORLD_SIZE=2 "$probe"
expect "WORLD_SIZE=0" 3 "WORLD_SIZE=0 is out of range" "1..65536" -- "${torch[@]}" RANK=0 WORLD_SIZE=0 "$probe"
expect "rank >= size" 3 "RANK=2 is not below WORLD_SIZE=2" "0..1" -- "${torch[@]}" RANK=2 WORLD_SIZE=2 "$probe"
expect "RANK without WORLD_SIZE" 3 "RANK is set but WORLD_SIZE is not" -- "${torch[@]}" RANK=0 "$probe"
expect "MASTER_PORT=http" 3 "MASTER_PORT='http' is not an integer" -- "${clean[@]}" RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=http "$probe"
expect "MASTER_PORT=70000" 3 "MASTER_PORT=70000 is out of range" "1..65535" -- "${clean[@]}" RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=70000 "$probe"
expect "MASTER_PORT=65535" 3 "APERTURE_MASTER_PORT" -- "${clean[@]}" RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=65535 "$probe"
expect "no MASTER_ADDR" 3 "MASTER_ADDR/MASTER_PORT are not" -- "${clean[@]}" RANK=1 WORLD_SIZE=2 "$probe"
expect "unreachable MASTER_ADDR:PORT" 3 "cannot reach the rendezvous hub at any of tcp:127.0.0.1:$((closed_port + 1)) .." "MASTER_ADDR/MASTER_PORT" -- \
  "${clean[@]}" RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$closed_port "$probe"
expect "unresolvable MASTER_ADDR" 3 "cannot resolve host 'no-such-host.invalid'" -- \
  "${clean[@]}" RANK=1 WORLD_SIZE=2 MASTER_ADDR=no-such-host.invalid MASTER_PORT=29500 "$probe"
# Under torchrun rank 0 serves aperture's rendezvous on the first free port of MASTER_PORT + 1 ..
# + 8. A helper of the test's own, on loopback, holds ports the way a job's neighbours do.
holder_out="${TMPDIR:-/tmp}/env_misuse_holder.$$"
hold_ports() {  # hold_ports MODE FIRST LAST: on each port, MODE=listen: a listener that never answers;
                # junk: one that answers anything with a line of text and closes; full: one whose accept
                # queue is full, so the kernel drops new connections' packets (as a firewall would);
                # connected: the local port of a connection out to a store on FIRST - 1
  python3 -c 'import socket, sys, threading, time
mode, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
held = []
if mode == "connected":
    store = socket.socket(); store.bind(("127.0.0.1", first - 1)); store.listen(); held.append(store)
def answer_junk(listener):
    while True:
        peer, _ = listener.accept(); peer.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n"); peer.close()
for port in range(first, last + 1):
    s = socket.socket()  # a connection made the usual way has no SO_REUSEADDR: its port stays its own
    if mode != "connected": s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1" if mode == "connected" else "0.0.0.0", port))
    s.connect(("127.0.0.1", first - 1)) if mode == "connected" else s.listen(0 if mode == "full" else 128)
    if mode == "junk": threading.Thread(target=answer_junk, args=(s,), daemon=True).start()
    held.append(s)
    for _ in range(3 if mode == "full" else 0):  # connections never accepted: the queue holds one
        c = socket.socket(); c.setblocking(False); c.connect_ex(("127.0.0.1", port)); held.append(c)
print("held", flush=True); time.sleep(60)' "$@" > "$holder_out" 2>&1 &
  holder=$!
  for _ in $(seq 100); do grep -q held "$holder_out" 2>/dev/null && break; sleep 0.1; done
  grep -q held "$holder_out" 2>/dev/null && return 0
  failures=$((failures + 1)); echo "FAIL - holding ports $2 .. $3 ($1): $(cat "$holder_out" 2>/dev/null)"
}
release_ports() { kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null; rm -f "$holder_out"; }
held_port=$(( closed_port + 2 ))
# A two-rank torchrun-style job on MASTER_PORT = held_port - 1 forms, both ranks.
job_forms() {  # job_forms NAME
  local rank1_out="${TMPDIR:-/tmp}/env_misuse_rank1.$$" rank1 rc
  "${clean[@]}" APERTURE_TIMEOUT=10 RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((held_port - 1)) "$probe" \
    > "$rank1_out" 2>&1 &
  rank1=$!
  expect "$1: rank 0 takes the next port" 0 "probe ok: rank 0 of 2" -- \
    "${clean[@]}" APERTURE_TIMEOUT=10 RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((held_port - 1)) "$probe"
  wait "$rank1"; rc=$?
  if (( rc == 0 )) && grep -q "probe ok: rank 1 of 2" "$rank1_out"; then
    passed=$((passed + 1)); echo "ok   - $1: rank 1 finds the hub on the next port"
  else
    failures=$((failures + 1)); echo "FAIL - $1: rank 1 exit $rc: $(cat "$rank1_out")"
  fi
  rm -f "$rank1_out"
}
# MASTER_PORT + 1 is the local port of a connection to torch's store (what a torchrun job's own
# processes do), or another process listens there (torch's store of a job started on the next
# MASTER_PORT): the job forms on the next port. A listener that is not the hub is passed over,
# whether it stays silent or answers something else.
hold_ports connected "$held_port" "$held_port"
job_forms "MASTER_PORT + 1 taken by a connection"
release_ports
hold_ports listen "$held_port" "$held_port"
job_forms "MASTER_PORT + 1 held by a silent listener"
expect "only a silent listener: rank 1 names it" 3 "found no rendezvous hub of this job at any of" \
  "tcp:127.0.0.1:$held_port did not answer this rank's hello in time" "Nothing listened at the others" -- \
  "${clean[@]}" APERTURE_TIMEOUT=2 RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((held_port - 1)) "$probe"
release_ports
hold_ports junk "$held_port" "$held_port"
job_forms "MASTER_PORT + 1 held by a listener answering junk"
release_ports
# A connection whose packets are dropped is given up on at APERTURE_TIMEOUT, not after the
# kernel's two minutes of retries; past such a port the job forms.
hold_ports full "$held_port" "$held_port"
job_forms "MASTER_PORT + 1 dropping connections"
expect "only a port dropping connections: rank 1 gives up in time" 3 "cannot reach the rendezvous hub at any of" \
  "no answer to the connection in time" -- \
  "${clean[@]}" APERTURE_TIMEOUT=2 RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((held_port - 1)) "$probe"
expect "APERTURE_HUB dropping connections: given up in time" 3 "cannot reach the rendezvous hub at tcp:127.0.0.1:$held_port" \
  "no answer to the connection in time" -- \
  "${clean[@]}" APERTURE_TIMEOUT=2 APERTURE_RANK=1 APERTURE_WORLD_SIZE=2 APERTURE_HUB=tcp:127.0.0.1:$held_port "$probe"
release_ports
# The same on one machine: a hub's Unix socket whose queue is full (a hub that stopped accepting).
full_queue="aperture-full-queue-$$"
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind("\0" + sys.argv[1]); s.listen(0)
held = [s]
for _ in range(3):
    c = socket.socket(socket.AF_UNIX); c.setblocking(False); c.connect_ex("\0" + sys.argv[1]); held.append(c)
print("held", flush=True); time.sleep(60)' "$full_queue" > "$holder_out" 2>&1 &
holder=$!
for _ in $(seq 50); do grep -q held "$holder_out" 2>/dev/null && break; sleep 0.1; done
expect "APERTURE_HUB whose queue is full: given up in time" 3 "cannot reach the rendezvous hub at unix:@$full_queue" \
  "queue of connections is full" -- \
  "${clean[@]}" APERTURE_TIMEOUT=2 APERTURE_RANK=1 APERTURE_WORLD_SIZE=2 APERTURE_HUB=unix:@$full_queue "$probe"
release_ports
# Every one of the eight ports taken: rank 0 says which, why, and names APERTURE_MASTER_PORT.
hold_ports listen "$held_port" $(( held_port + 7 ))
expect "MASTER_PORT + 1 .. + 8 all taken" 3 "cannot listen on 0.0.0.0:$(( held_port + 7 ))" \
  "first free port of $held_port .. $(( held_port + 7 )) (MASTER_PORT + 1 .. + 8" "set APERTURE_MASTER_PORT" -- \
  "${clean[@]}" RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((held_port - 1)) "$probe"
expect "APERTURE_MASTER_PORT taken" 3 "APERTURE_MASTER_PORT=$held_port is not free" -- \
  "${clean[@]}" RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$closed_port APERTURE_MASTER_PORT=$held_port "$probe"
# The same for srun's task 0 (the ports after MASTER_PORT, as torch's store has that one).
expect "srun: MASTER_PORT + 1 .. + 8 all taken" 3 "task 0 cannot serve aperture's rendezvous" \
  "first free port of $held_port .. $(( held_port + 7 )) (from MASTER_PORT + 1)" "set APERTURE_MASTER_PORT" -- \
  "${clean[@]}" SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=2 SLURM_STEP_NODELIST=localhost SLURM_JOB_ID=$$ \
  MASTER_PORT=$((held_port - 1)) "$probe"
release_ports
# Slurm's srun, written by hand as srun writes a task's variables (tests/multinode/slurm_test.sh
# runs the real srun): malformed ones are named; a batch script's shell and a step of one task are
# a job of one; a step of two forms on loopback through the ports chosen by its job and step ids.
srun_task=("${clean[@]}" SLURM_JOB_ID=$$ SLURM_STEP_ID=$RANDOM SLURM_CLUSTER_NAME=envmisuse)
expect "srun task >= tasks" 3 "SLURM_PROCID=2 is not below SLURM_STEP_NUM_TASKS=2" -- \
  "${srun_task[@]}" SLURM_PROCID=2 SLURM_STEP_NUM_TASKS=2 SLURM_STEP_NODELIST=localhost "$probe"
expect "srun without SLURM_STEP_NODELIST" 3 "SLURM_STEP_NODELIST is not" -- \
  "${srun_task[@]}" SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=2 "$probe"
expect "srun with a malformed SLURM_STEP_NODELIST" 3 "SLURM_STEP_NODELIST='node[1-' is not a Slurm host list" -- \
  "${srun_task[@]}" SLURM_PROCID=1 SLURM_STEP_NUM_TASKS=2 SLURM_STEP_NODELIST='node[1-' "$probe"
expect "a Slurm batch script's shell is one rank" 0 "probe ok: rank 0 of 1" -- \
  "${srun_task[@]}" SLURM_PROCID=0 SLURM_NTASKS=4 "$probe"
expect "an srun step of one task is one rank" 0 "probe ok: rank 0 of 1" -- \
  "${srun_task[@]}" SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=1 SLURM_STEP_NODELIST=localhost "$probe"
expect "srun task 0 off the step's first node" 3 "srun started task 0 on node 'node2'" "set MASTER_ADDR" -- \
  "${srun_task[@]}" SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=2 SLURM_STEP_NODELIST='node[1-2]' SLURMD_NODENAME=node2 "$probe"
srun_out="${TMPDIR:-/tmp}/env_misuse_srun.$$"
"${srun_task[@]}" APERTURE_TIMEOUT=10 SLURM_PROCID=1 SLURM_STEP_NUM_TASKS=2 SLURM_STEP_NODELIST=localhost \
  SLURMD_NODENAME=localhost "$probe" > "$srun_out" 2>&1 &
srun_rank1=$!
expect "an srun step of two forms: task 0" 0 "probe ok: rank 0 of 2" -- \
  "${srun_task[@]}" APERTURE_TIMEOUT=10 SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=2 SLURM_STEP_NODELIST=localhost \
  SLURMD_NODENAME=localhost "$probe"
if wait "$srun_rank1" && grep -q "probe ok: rank 1 of 2" "$srun_out"; then
  passed=$((passed + 1)); echo "ok   - an srun step of two forms: task 1"
else
  failures=$((failures + 1)); echo "FAIL - an srun step of two forms: task 1: $(cat "$srun_out")"
fi
rm -f "$srun_out"
expect "OMPI rank >= size" 3 "OMPI_COMM_WORLD_RANK=4 is not below OMPI_COMM_WORLD_SIZE=4" -- \
  "${clean[@]}" OMPI_COMM_WORLD_RANK=4 OMPI_COMM_WORLD_SIZE=4 "$probe"
expect "APERTURE_RANK without APERTURE_HUB" 3 "APERTURE_HUB is not" "aperture launch" -- \
  "${clean[@]}" APERTURE_RANK=0 APERTURE_WORLD_SIZE=2 "$probe"
expect "malformed APERTURE_HUB" 3 "malformed hub address 'bogus'" "unix:@name or tcp:host:port" -- \
  "${clean[@]}" APERTURE_RANK=0 APERTURE_WORLD_SIZE=2 APERTURE_HUB=bogus "$probe"
expect "APERTURE_HUB nobody listens on" 3 "cannot reach the rendezvous hub at unix:@aperture-nobody-here" -- \
  "${clean[@]}" APERTURE_RANK=0 APERTURE_WORLD_SIZE=2 APERTURE_HUB=unix:@aperture-nobody-here "$probe"
expect "APERTURE_TIMEOUT=abc" 3 "APERTURE_TIMEOUT='abc' is not a positive number" -- \
  env APERTURE_TIMEOUT=abc RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$closed_port "$probe"
expect "APERTURE_HEAP_SIZE=lots" 3 "APERTURE_HEAP_SIZE='lots' is not a size" -- "${clean[@]}" APERTURE_HEAP_SIZE=lots "$probe" shm
expect "unknown provider" 3 "unknown provider 'nope'" "available here: " -- "${clean[@]}" "$probe" nope
expect "launch -n 0" 2 "0" -- "$aperture" launch -n 0 -- true
expect "launch -n 1025" 2 "1025" -- "$aperture" launch -n 1025 -- true
expect "launch without a program" 2 "" -- "$aperture" launch -n 2
expect "launch of a missing program" 2 "/nonexistent/program" -- "$aperture" launch -n 2 -- /nonexistent/program
expect "launch of a file that is not executable" 2 "/etc/hostname" -- "$aperture" launch -n 2 -- /etc/hostname
expect "launch --timeout abc" 2 "--timeout" -- "$aperture" launch -n 2 --timeout abc -- true
expect "launch with APERTURE_TIMEOUT=abc" 2 "APERTURE_TIMEOUT='abc'" -- env APERTURE_TIMEOUT=abc "$aperture" launch -n 2 -- true

# A world larger than the shm provider can map here: every rank maps every peer's heap, so with
# the address space limited to ~3 heaps the job of 4 ranks fails on every rank, naming the rank
# and the fix (sanitizer builds reserve terabytes of shadow memory and cannot run under a limit).
if ldd "$probe" | grep -q -e libasan -e libtsan; then
  echo "skip - world larger than the address space holds (sanitizer build)"
else
  expect "world larger than shm can map" 3 "mmap of rank" "lower APERTURE_HEAP_SIZE" -- \
    env APERTURE_HEAP_SIZE=1G APERTURE_TIMEOUT=10 "$aperture" launch -n 4 -- sh -c "ulimit -v 3500000 && exec $probe shm"
  reports=$(grep -c "probe error: aperture: shm" <<<"$out")
  if [[ $reports == 4 ]]; then passed=$((passed + 1)); echo "ok   - world larger than shm can map: every rank says so"
  else failures=$((failures + 1)); echo "FAIL - world larger than shm can map: $reports of 4 ranks reported"; fi
  expect "the same heaps fit a smaller world" 0 "probe ok: rank 0 of 2" -- \
    env APERTURE_HEAP_SIZE=1G APERTURE_TIMEOUT=10 "$aperture" launch -n 2 -- sh -c "ulimit -v 3500000 && exec $probe shm"
fi

echo "env_misuse: $passed passed, $failures failed"
(( failures == 0 ))
