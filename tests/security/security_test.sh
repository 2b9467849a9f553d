#!/usr/bin/env bash
# security_test.sh APERTURE JOB_PROBE STRANGER: what another user, and another job of the same
# user, can do to a running job (docs/SECURITY.md: the threat model and what each check shows).
#
# Another user (created here when run as root: useradd aperture-stranger):
#   - cannot join a job's hub over its abstract Unix socket, even holding the job's token
#     (the hub checks SO_PEERCRED), and cannot read the token from the ranks' environment;
#   - cannot open a rank's heap (/proc/PID/fd/N of its memfd), its memory (/proc/PID/mem) or
#     its mappings (/proc/PID/map_files);
#   - cannot lure a rank into its own fake hub: a rank refuses a hub of another user before it
#     sends a byte (so not its token either).
# Another job of the same user, or any stranger:
#   - is refused with the wrong token, sending garbage, or claiming a rank already connected,
#     and the job goes on (its ranks then check that their data and Team are intact);
#   - over TCP (torchrun/mpirun jobs) is refused by the token alone, without taking the rank it
#     claimed, and an idle connection does not hold the job up;
#   - never sees the same token twice (fresh random token per launch).
# Without root the cross-user checks are skipped (APERTURE_SECURITY_REQUIRE_USER=1 makes that
# a failure, as .ci/run does).
set -u
aperture=$1 job_probe=$2 stranger_bin=$3
failures=0 passed=0 skipped=0
export APERTURE_TIMEOUT=30 APERTURE_HEAP_SIZE=64M
user=aperture-stranger

ok() { passed=$((passed + 1)); echo "ok   - $*"; }
bad() { failures=$((failures + 1)); echo "FAIL - $*"; }
skip() { skipped=$((skipped + 1)); echo "skip - $*"; }
check() {  # check NAME COMMAND...: the command must exit 0 (a stranger kept out)
  local name=$1; shift
  local out; out=$("$@" 2>&1); local rc=$?
  if [[ $rc == 0 ]]; then ok "$name: $out"; else bad "$name (exit $rc): $out"; fi
}

# --- who plays the other user ----------------------------------------------------------------
as_other=()
if [[ $(id -u) == 0 ]]; then
  if ! id "$user" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$user" 2>/dev/null ||
      useradd -r -M -s /bin/false "$user" 2>/dev/null || true
  fi
  if id "$user" >/dev/null 2>&1 && command -v setpriv >/dev/null; then
    as_other=(setpriv --reuid="$(id -u "$user")" --regid="$(id -g "$user")" --clear-groups --)
  fi
fi
if [[ ${#as_other[@]} == 0 ]]; then
  if [[ "${APERTURE_SECURITY_REQUIRE_USER:-0}" == 1 ]]; then
    bad "cannot act as another user (needs root, useradd and setpriv); the cross-user checks did not run"
  fi
fi
# The work folder holds what the other user must reach (its program, the suppressions), so it
# must be one that user can enter: /tmp may be private to root (seen on a development machine,
# /tmp 0700), and /var/tmp is tried after it.
work=
for base in "${TMPDIR:-/tmp}" /var/tmp; do
  candidate=$(mktemp -d -p "$base" aperture-security.XXXXXX) || continue
  chmod 755 "$candidate"
  if [[ ${#as_other[@]} == 0 ]] || "${as_other[@]}" test -x "$candidate"; then
    work=$candidate
    break
  fi
  rm -rf "$candidate"
done
[[ -n $work ]] || { echo "FAIL - no temporary folder the other user can enter (tried ${TMPDIR:-/tmp}, /var/tmp)"; exit 1; }
trap 'touch "$work/job/release" "$work/tcp/release" 2>/dev/null; sleep 0.3; kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
cp "$stranger_bin" "$work/stranger" && chmod 755 "$work/stranger"
stranger="$work/stranger"

# A sanitizer run names its suppressions files in *SAN_OPTIONS, inside the tree; the other user
# may not read the tree (a clone in a private directory), and a sanitized stranger that cannot
# read them dies before it runs. Every process here reads world-readable copies instead.
for var in ASAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS UBSAN_OPTIONS; do
  options=${!var-}
  # The option itself, not print_suppressions: at the start or after a ':'.
  file=$(sed -n 's/^\(.*:\)\{0,1\}suppressions=\([^:]*\).*/\2/p' <<<"$options")
  [[ -n $file ]] || continue
  copy="$work/${var%_OPTIONS}.supp"
  cp "$file" "$copy" && chmod 644 "$copy" || { echo "FAIL - cannot copy $var's suppressions $file"; exit 1; }
  export "$var=${options/"suppressions=$file"/"suppressions=$copy"}"
done

cross_user() {  # cross_user NAME COMMAND...: a check run as the other user, or skipped
  local name=$1; shift
  if [[ ${#as_other[@]} == 0 ]]; then skip "$name (not root: no other user to act as)"; return; fi
  check "$name" "${as_other[@]}" "$@"
}

wait_for() {  # wait_for FILE...: until each exists (at most 30 s)
  local deadline=$((SECONDS + 30)) f
  for f in "$@"; do
    while [[ ! -e $f ]]; do
      (( SECONDS < deadline )) || return 1
      sleep 0.05
    done
  done
}

# --- a job under `aperture launch`: abstract Unix socket hub, shm heaps ---------------------------
mkdir -p "$work/job"
"$aperture" launch -n 2 -- "$job_probe" "$work/job" >"$work/job.out" 2>&1 &
job=$!
if ! wait_for "$work/job/rank.0" "$work/job/rank.1"; then
  bad "the launched job did not start: $(cat "$work/job.out")"
else
  read -r pid0 memfd0 hub < "$work/job/rank.0"
  read -r pid1 memfd1 _ < "$work/job/rank.1"
  token=$(tr '\0' '\n' < "/proc/$pid0/environ" | sed -n 's/^APERTURE_JOB_TOKEN=//p')
  [[ $hub == unix:@* ]] && ok "the hub listens on an abstract socket ($hub): no file to leave behind or chmod" ||
    bad "hub address $hub is not an abstract Unix socket"
  grep -q "@${hub#unix:@}" /proc/net/unix && ok "the hub's socket is listed as abstract in /proc/net/unix" ||
    bad "the hub's socket is not in /proc/net/unix"
  [[ ${#token} -ge 32 ]] && ok "the job token has ${#token} hex digits" || bad "job token '$token' is short"
  [[ $memfd0 -ge 0 ]] && ok "rank 0's heap is a memfd (/proc/$pid0/fd/$memfd0); nothing in /dev/shm" ||
    bad "rank 0 has no memfd heap"
  ls /dev/shm 2>/dev/null | grep -qi aperture && bad "/dev/shm has aperture files: $(ls /dev/shm)"
  # A connection that says nothing is dropped after the hub's 10 s limit (observed, not assumed),
  # while the job goes on: this runs beside the checks below.
  "$stranger" idle "$hub" 9.5 14 >"$work/idle-unix.out" 2>&1 &
  idle_unix=$!

  # Another user.
  cross_user "another user cannot join the hub with a guessed token" "$stranger" hello "$hub" 1 2 guessed
  cross_user "another user cannot join the hub even with the job's token" "$stranger" hello "$hub" 1 2 "$token"
  cross_user "another user cannot send the hub garbage" "$stranger" garbage "$hub"
  # Each "cannot open" counts only with EACCES/EPERM, and beside a control: the owner (the job's
  # user) opens the very same path, so the path is right and the refusal is the kernel's.
  heap_map=$(ls -l "/proc/$pid0/map_files/" 2>/dev/null | awk '/aperture-shm-heap/ {print $9; exit}')
  opened=("rank 0's heap:/proc/$pid0/fd/$memfd0" "rank 1's heap:/proc/$pid1/fd/$memfd1"
          "rank 0's memory:/proc/$pid0/mem" "the job token in rank 0's environment:/proc/$pid0/environ")
  [[ -n $heap_map ]] && opened+=("rank 0's heap mapping:/proc/$pid0/map_files/$heap_map")
  for entry in "${opened[@]}"; do
    what=${entry%%:*} path=${entry#*:}
    check "control: the job's own user opens $what ($path)" "$stranger" owner-open "$path"
    cross_user "another user cannot open $what (EACCES/EPERM)" "$stranger" open "$path"
  done
  # Another job of the same user (or a stale environment): wrong token, garbage, a taken rank.
  check "the same user with another job's token is refused" "$stranger" hello "$hub" 1 2 not-this-jobs-token
  out=$("$stranger" hello "$hub" 1 2 not-this-jobs-token 2>&1)
  grep -q "wrong job token" <<<"$out" && ok "the refusal says why: $out" || bad "the refusal does not say 'wrong job token': $out"
  check "the same user's garbage is dropped" "$stranger" garbage "$hub"
  check "the same user cannot take a rank already connected, even with the token" "$stranger" hello "$hub" 1 2 "$token"
  check "the same user claiming a rank outside the world is refused" "$stranger" hello "$hub" 7 2 "$token"
  check "the same user claiming another world size is refused" "$stranger" hello "$hub" 0 3 "$token"
  if wait "$idle_unix"; then ok "an idle connection was dropped by the hub: $(cat "$work/idle-unix.out")"
  else bad "the hub's 10 s idle drop was not observed: $(cat "$work/idle-unix.out")"; fi
fi
touch "$work/job/release"
wait "$job"; rc=$?
if [[ $rc == 0 ]] && [[ $(grep -c "job-probe ok" "$work/job.out") == 2 ]]; then
  ok "the job went on unharmed: both ranks checked their Team and every peer's data"
else
  bad "the job did not survive the strangers (exit $rc): $(cat "$work/job.out")"
fi

# --- a rank never talks to a hub of another user ---------------------------------------------------
if [[ ${#as_other[@]} != 0 ]]; then
  name="aperture-fake-hub-$$"
  "${as_other[@]}" "$stranger" listen "$name" 6 >"$work/fake.out" 2>&1 &
  fake=$!
  for _ in $(seq 200); do grep -q "^listening" "$work/fake.out" 2>/dev/null && break; sleep 0.02; done
  out=$(env -u RANK -u WORLD_SIZE APERTURE_RANK=0 APERTURE_WORLD_SIZE=2 APERTURE_HUB="unix:@$name" \
        APERTURE_JOB_TOKEN=secret APERTURE_TIMEOUT=2 "$job_probe" "$work" 2>&1)
  wait "$fake"; rc=$?
  if grep -q "runs as another user" <<<"$out" && [[ $rc == 0 ]]; then
    ok "a rank refuses a hub run by another user and sends it nothing: $(tail -1 "$work/fake.out")"
  else
    bad "a rank talked to another user's hub: rank said: $out; fake hub: $(cat "$work/fake.out")"
  fi
else
  skip "a rank refuses a hub of another user (not root)"
fi

# --- a rank refuses a hub of its own user that does not know the job's token ---------------------
# The hub must prove the token first (a challenge on it, both ways): an impostor that cannot is
# refused, gets no proof and never sees the token. Over an abstract socket (APERTURE_HUB: the hub
# is there or nowhere, so the rank stops at once) and over TCP (a process that took the port
# before rank 0: the rank passes it over and looks on the later ports rank 0 may have taken, and
# names the impostor when its timeout ends with no hub found).
source "$(dirname "${BASH_SOURCE[0]}")/../common/tcp_ports.sh"
impostor_port=$(free_tcp_ports 2) || exit 1
for impostor in "unix:@aperture-impostor-$$" "tcp:127.0.0.1:$((impostor_port + 1))"; do
  "$stranger" fake-hub "$impostor" 8 guessed-token real-secret-token >"$work/impostor.out" 2>&1 &
  fake=$!
  for _ in $(seq 200); do grep -q "^listening" "$work/impostor.out" 2>/dev/null && break; sleep 0.02; done
  if [[ $impostor == unix:* ]]; then
    rank_env=(env -u RANK -u WORLD_SIZE APERTURE_RANK=1 APERTURE_WORLD_SIZE=2 APERTURE_HUB="$impostor"
              APERTURE_TIMEOUT=20)
  else
    rank_env=(env -u APERTURE_RANK -u APERTURE_WORLD_SIZE -u APERTURE_HUB RANK=1 LOCAL_RANK=1 WORLD_SIZE=2
              MASTER_ADDR=127.0.0.1 MASTER_PORT=$impostor_port APERTURE_TIMEOUT=3)
  fi
  start=$SECONDS
  out=$("${rank_env[@]}" APERTURE_JOB_TOKEN=real-secret-token "$job_probe" "$work" 2>&1)
  took=$((SECONDS - start))
  wait "$fake"; rc=$?
  if grep -q "does not know this job's token" <<<"$out" && [[ $rc == 0 && $took -lt 10 ]]; then
    ok "a rank refuses an impostor hub at $impostor in ${took} s: $(tail -1 "$work/impostor.out")"
  else
    bad "a rank did not refuse an impostor hub at $impostor (${took} s): rank said: $out; impostor: $(cat "$work/impostor.out")"
  fi
done

# --- a torchrun-style job forms past an impostor on MASTER_PORT + 1 ------------------------------
# Rank 0 finds the port taken and serves the hub on the next; rank 1 meets the impostor first,
# refuses it (it learns nothing: the fake hub's own verdict) and joins the hub on the next port.
mkdir -p "$work/past"
past_port=$(free_tcp_ports 3) || exit 1
"$stranger" fake-hub "tcp:127.0.0.1:$((past_port + 1))" 6 guessed-token past-secret-token >"$work/impostor.out" 2>&1 &
fake=$!
for _ in $(seq 200); do grep -q "^listening" "$work/impostor.out" 2>/dev/null && break; sleep 0.02; done
past_env=(env -u APERTURE_RANK -u APERTURE_WORLD_SIZE -u APERTURE_HUB WORLD_SIZE=2 MASTER_ADDR=127.0.0.1
          MASTER_PORT=$past_port APERTURE_JOB_TOKEN=past-secret-token APERTURE_TIMEOUT=10)
"${past_env[@]}" RANK=1 LOCAL_RANK=1 "$job_probe" "$work/past" >"$work/past1.out" 2>&1 &
past1=$!
"${past_env[@]}" RANK=0 LOCAL_RANK=0 "$job_probe" "$work/past" >"$work/past0.out" 2>&1 &
past0=$!
for _ in $(seq 300); do [[ -e $work/past/rank.1 ]] && break; sleep 0.05; done  # the job formed
tcp_listening $((past_port + 2)) && past_hub="port $((past_port + 2))" || past_hub="not on port $((past_port + 2))"
touch "$work/past/release"
wait "$past0"; past0_rc=$?
wait "$past1"; past1_rc=$?
wait "$fake"; fake_rc=$?
if [[ $past0_rc == 0 && $past1_rc == 0 && $fake_rc == 0 && $past_hub == port* ]]; then
  ok "a torchrun-style job forms past an impostor on MASTER_PORT + 1 (hub $past_hub): $(tail -1 "$work/impostor.out")"
else
  bad "a torchrun-style job did not form past an impostor on MASTER_PORT + 1 (ranks exit $past0_rc, $past1_rc;" \
      "hub $past_hub, impostor exit $fake_rc): rank 0: $(cat "$work/past0.out"); rank 1: $(cat "$work/past1.out");" \
      "impostor: $(cat "$work/impostor.out")"
fi

# --- a torchrun-style job: TCP hub in rank 0, strangers refused by the token --------------------
mkdir -p "$work/tcp"
port=$(free_tcp_ports 2) || exit 1
tcp_token="tcp-secret-$RANDOM$RANDOM"
tcp_env=(env -u APERTURE_RANK -u APERTURE_WORLD_SIZE -u APERTURE_HUB WORLD_SIZE=2 MASTER_ADDR=127.0.0.1
         MASTER_PORT=$port APERTURE_JOB_TOKEN=$tcp_token)
"${tcp_env[@]}" RANK=0 LOCAL_RANK=0 "$job_probe" "$work/tcp" >"$work/tcp0.out" 2>&1 &
tcp0=$!
for _ in $(seq 600); do tcp_listening $((port + 1)) && break; sleep 0.05; done
tcp_listening $((port + 1)) || bad "rank 0's TCP hub did not start listening on port $((port + 1)): $(cat "$work/tcp0.out")"
tcp_hub="tcp:127.0.0.1:$((port + 1))"
"$stranger" idle "$tcp_hub" 3 >"$work/idle.out" 2>&1 &
idle=$!
if [[ ${#as_other[@]} != 0 ]]; then
  cross_user "another user over TCP, claiming rank 1 with a guessed token, is refused" "$stranger" hello "$tcp_hub" 1 2 guessed
  cross_user "another user's garbage over TCP is dropped" "$stranger" garbage "$tcp_hub"
else
  check "a stranger over TCP, claiming rank 1 with a guessed token, is refused" "$stranger" hello "$tcp_hub" 1 2 guessed
  check "garbage over TCP is dropped" "$stranger" garbage "$tcp_hub"
fi
check "a stranger over TCP with a token of the same length is refused" "$stranger" hello "$tcp_hub" 1 2 \
  "$(printf '%*s' ${#tcp_token} '' | tr ' ' x)"
# Rank 1 arrives after all that: its rank was not taken, the job forms and runs.
"${tcp_env[@]}" RANK=1 LOCAL_RANK=1 "$job_probe" "$work/tcp" >"$work/tcp1.out" 2>&1 &
tcp1=$!
if wait_for "$work/tcp/rank.0" "$work/tcp/rank.1"; then
  touch "$work/tcp/release"
  wait "$tcp0"; rc0=$?
  wait "$tcp1"; rc1=$?
  if [[ $rc0 == 0 && $rc1 == 0 ]]; then ok "the TCP job formed and ran after the strangers (an idle one still connected)"
  else bad "the TCP job failed: rank 0 ($rc0): $(cat "$work/tcp0.out"); rank 1 ($rc1): $(cat "$work/tcp1.out")"; fi
else
  bad "the TCP job did not form: rank 0: $(cat "$work/tcp0.out"); rank 1: $(cat "$work/tcp1.out")"
  touch "$work/tcp/release"
fi
wait "$idle" 2>/dev/null

# --- every launch has its own token -------------------------------------------------------------
t1=$("$aperture" launch -n 1 -- sh -c 'echo "$APERTURE_JOB_TOKEN"' 2>&1 | sed 's/^\[rank 0\] //')
t2=$("$aperture" launch -n 1 -- sh -c 'echo "$APERTURE_JOB_TOKEN"' 2>&1 | sed 's/^\[rank 0\] //')
if [[ -n $t1 && $t1 != "$t2" && $t1 =~ ^[0-9a-f]{32,}$ ]]; then ok "two launches get two random tokens"
else bad "tokens are not fresh per launch: '$t1' and '$t2'"; fi

echo "security: $passed passed, $failures failed, $skipped skipped"
(( failures == 0 ))
