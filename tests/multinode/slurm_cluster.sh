#!/usr/bin/env bash
# tests/multinode/slurm_cluster.sh — a real, private Slurm cluster on simulated nodes
# (scripts/simnodes.sh), so a test can run `srun` jobs across 2 or more "nodes" on one machine.
#
#   slurm_cluster.sh check              can it be made here? exit 0, or 77 with the reason
#   slurm_cluster.sh up K               K nodes, slurmctld on node 0, a slurmd on each; waits until
#                                       every node is idle; prints the path of an env file to source
#                                       (SLURM_CONF, SLURM_CLUSTER_DIR, SIMNODES_NAME, SLURM_NODES=K)
#   slurm_cluster.sh srun DIR -- ARGS   `srun ARGS` on node 0 of the cluster in DIR (cwd and
#                                       environment kept, less an outer job's SLURM_* variables);
#   slurm_cluster.sh salloc DIR -- ARGS `salloc ARGS` there likewise (a command in an allocation)
#   slurm_cluster.sh down DIR           stops its daemons and jobs, removes the nodes and DIR;
#                                       idempotent
#
# Everything is the cluster's own: a 0700 temp dir (DIR) holds a munge key, a munged with its own
# socket, slurm.conf, and every spool, state, pid and log file, so it shares nothing with a Slurm or
# munge the machine may run. Each daemon runs inside its node's namespaces: slurmctld (6817) and
# slurmd (6818) listen on the node's address, nothing on the machine's own network, and the
# controller reaches each slurmd over the simulated network by NodeAddr. Only node 0 can reach the
# controller, hence `srun DIR` and `salloc DIR`, which run them there.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
simnodes="$(cd "$here/../../scripts" && pwd)/simnodes.sh"
self="$here/$(basename "${BASH_SOURCE[0]}")"

die() { echo "slurm_cluster: $*" >&2; exit 1; }

check() {
  local tool
  for tool in slurmd slurmctld srun sinfo munged; do
    # The daemons live in sbin, which a non-login PATH may lack.
    PATH="$PATH:/usr/sbin:/sbin" command -v "$tool" >/dev/null || { echo "Slurm unavailable: $tool not installed"; return 77; }
  done
  local why
  why="$(bash "$simnodes" check)" || { echo "$why"; return 77; }
}

node_exec() {  # node_exec DIR K CMD...: CMD on node K with the cluster's conf
  local dir="$1" k="$2"; shift 2
  SLURM_CONF="$dir/slurm.conf" bash "$simnodes" exec "$(cat "$dir/simnodes_name")" "$k" -- "$@"
}

up() {
  local k="$1" t0=$SECONDS
  [[ $k =~ ^[0-9]+$ && $k -ge 1 ]] || die "up: K must be a positive number, got '$k'"
  check >/dev/null || { check; exit 77; }
  export PATH="$PATH:/usr/sbin:/sbin"
  local dir name i
  dir="$(mktemp -d "${TMPDIR:-/tmp}/slurm-cluster.XXXXXX")"  # mode 0700: munged checks it
  # A start that fails anywhere (die included) leaves nothing behind.
  trap 'down "$dir" >/dev/null 2>&1' EXIT
  name="$(bash "$simnodes" up "$k")"
  echo "$name" >"$dir/simnodes_name"
  mkdir -m 0700 "$dir/munge" "$dir/spool" "$dir/state" "$dir/run" "$dir/log" "$dir/tmp"

  # A key of its own: a job of this cluster is no credential on any other.
  if command -v mungekey >/dev/null; then
    mungekey -c -k "$dir/munge/munge.key"
  else
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  fi
  chmod 0400 "$dir/munge/munge.key"
  # One munged serves every node: its socket is a file, which every namespace of the set reaches.
  # Started on node 0 so that it too is inside the set's namespaces; --force: run as root.
  bash "$simnodes" exec "$name" 0 -- munged --force --key-file="$dir/munge/munge.key" \
    --socket="$dir/munge/munge.socket" --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" </dev/null >>"$dir/log/start.log" 2>&1 ||
    die "munged did not start: $(tail -n 5 "$dir/log/start.log" "$dir/log/munged.log" 2>/dev/null)"

  {
    echo "ClusterName=$name"  # unique per set: nothing mixes with another cluster's state
    echo "SlurmctldHost=$name-node0($(bash "$simnodes" addr "$name" 0))"
    echo "AuthType=auth/munge"
    echo "AuthInfo=socket=$dir/munge/munge.socket"
    echo "CredType=cred/munge"
    # No cgroups: the nodes share the machine's, and a container may not let us have any.
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    echo "MpiDefault=none"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "ReturnToService=2"
    # Nodes have the CPUs written here, not the machine's (8 each on a 2-core machine).
    echo "SlurmdParameters=config_overrides"
    # %n: every slurmd shares this file system, so each gets its own files.
    echo "SlurmdSpoolDir=$dir/spool/%n"
    echo "SlurmdPidFile=$dir/run/slurmd-%n.pid"
    echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
    echo "TmpFS=$dir/tmp/%n"  # where mpi/pmix puts each node's client directories
    echo "StateSaveLocation=$dir/state"
    echo "SlurmctldPidFile=$dir/run/slurmctld.pid"
    echo "SlurmctldLogFile=$dir/log/slurmctld.log"
    for ((i = 0; i < k; i++)); do
      echo "NodeName=$name-node$i NodeAddr=$(bash "$simnodes" addr "$name" "$i") CPUs=8 State=UNKNOWN"
    done
    echo "PartitionName=sim Nodes=ALL Default=YES OverSubscribe=FORCE MaxTime=INFINITE State=UP"
  } >"$dir/slurm.conf"
  for ((i = 0; i < k; i++)); do mkdir -m 0700 "$dir/spool/$name-node$i" "$dir/tmp/$name-node$i"; done

  # Each daemon forks into the background inside its node's namespaces; its stdio must not be the
  # caller's (a caller reading `up`'s output through a pipe would wait for them).
  node_exec "$dir" 0 slurmctld -c </dev/null >>"$dir/log/start.log" 2>&1 ||
    die "slurmctld did not start: $(tail -n 5 "$dir/log/start.log" "$dir/log/slurmctld.log" 2>/dev/null)"
  for ((i = 0; i < k; i++)); do
    node_exec "$dir" "$i" slurmd -N "$name-node$i" </dev/null >>"$dir/log/start.log" 2>&1 ||
      die "slurmd on node $i did not start: $(tail -n 5 "$dir/log/start.log" "$dir/log/slurmd-$name-node$i.log" 2>/dev/null)"
  done

  # Ready when every node has registered and is idle (bounded: a broken start fails, not hangs).
  local idle=0
  while ((SECONDS - t0 < 30)); do
    idle="$(node_exec "$dir" 0 sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle"' | sort -u | wc -l)" || idle=0
    ((idle == k)) && break
    sleep 0.2
  done
  ((idle == k)) || die "only $idle of $k nodes idle after 30 s: $(node_exec "$dir" 0 sinfo -N 2>&1; tail -n 5 "$dir"/log/*.log)"

  {
    echo "export SLURM_CONF='$dir/slurm.conf'"
    echo "export SLURM_CLUSTER_DIR='$dir'"
    echo "export SIMNODES_NAME='$name'"
    echo "export SLURM_NODES=$k"
  } >"$dir/env"
  trap - EXIT
  echo "$dir/env"
}

cluster_dir() {  # the cluster's DIR, given DIR or its env file
  local dir="${1%/env}"
  [[ -f $dir/slurm.conf && -f $dir/simnodes_name ]] || die "'$1' is not a cluster made by \`slurm_cluster.sh up\`"
  echo "$dir"
}

run_on_node0() {  # run_on_node0 TOOL DIR [--] ARGS: a Slurm client (srun, salloc) on node 0
  local tool="$1" dir; dir="$(cluster_dir "$2")"; shift 2
  [[ ${1:-} == -- ]] && shift
  # An outer job's variables (the caller may itself be a Slurm job) would make srun look for that
  # job in this cluster.
  local v
  for v in $(compgen -e | grep '^SLURM_' || true); do
    [[ $v == SLURM_CONF || $v == SLURM_CLUSTER_DIR || $v == SLURM_NODES ]] || unset "$v"
  done
  exec env SLURM_CONF="$dir/slurm.conf" bash "$simnodes" exec "$(cat "$dir/simnodes_name")" 0 -- "$tool" "$@"
}

alive() {  # is PID running (a zombie waiting for its parent is not)?
  local state
  state="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
  [[ -n $state && $state != Z ]]
}

stop() {  # stop SIGNAL TENTHS PID...: signal them, wait up to TENTHS/10 s for them to go
  local sig="$1" tenths="$2" pid n; shift 2
  for pid in "$@"; do kill "-$sig" "$pid" 2>/dev/null || true; done
  for ((n = 0; n < tenths; n++)); do
    local left=0
    for pid in "$@"; do alive "$pid" && left=1; done
    ((left)) || return 0
    sleep 0.1
  done
  return 1
}

down() {
  local dir="${1%/env}"
  [[ -d $dir ]] || return 0
  [[ -f $dir/slurm.conf || -f $dir/simnodes_name ]] || die "down: '$1' is not a cluster made by \`slurm_cluster.sh up\`"
  local name="" pids=() ns pid f n
  [[ -f $dir/simnodes_name ]] && name="$(cat "$dir/simnodes_name")"
  if [[ -n $name ]]; then
    # Only processes inside the set's namespaces: a pid file's stale pid may now be anyone's.
    local mine; mine="$(ip netns list | awk '{print $1}' | grep -E "^$name-n[0-9]+$" || true)"
    for f in "$dir"/run/slurmd-*.pid "$dir"/run/slurmctld.pid; do
      [[ -f $f ]] || continue
      pid="$(cat "$f")"
      ns="$(ip netns identify "$pid" 2>/dev/null || true)"
      [[ $pid =~ ^[0-9]+$ && -n $ns ]] && grep -qxF "$ns" <<<"$mine" && pids+=("$pid")
    done
    # Jobs still running end as Slurm ends them (slurmstepd ignores SIGTERM): cancel them all and
    # wait (bounded) until the controller has seen every one complete.
    if ((${#pids[@]})) && node_exec "$dir" 0 scancel --partition=sim >/dev/null 2>&1; then
      for ((n = 0; n < 50; n++)); do
        [[ -z $(node_exec "$dir" 0 squeue -h -o %i 2>/dev/null || true) ]] && break
        sleep 0.1
      done
    fi
    # Then the Slurm daemons, so that none starts anything while the rest go.
    if ((${#pids[@]})); then stop TERM 100 "${pids[@]}" || stop KILL 50 "${pids[@]}" || true; fi
    # Then whatever is still on the nodes: munged, and a job's processes that outlived the above.
    pids=()
    for ns in $mine; do
      for pid in $(ip netns pids "$ns" 2>/dev/null); do pids+=("$pid"); done
    done
    if ((${#pids[@]})); then stop TERM 20 "${pids[@]}" || stop KILL 50 "${pids[@]}" || true; fi
    bash "$simnodes" down "$name"
  fi
  rm -rf --one-file-system "$dir"
}

command="${1:-}"
[[ $# -gt 0 ]] && shift
case "$command" in
  check) check ;;
  up) up "${1:?up K}" ;;
  srun|salloc) run_on_node0 "$command" "${1:?$command DIR -- ARGS}" "${@:2}" ;;
  down) down "${1:?down DIR}" ;;
  *) sed -n '2,20p' "$self" | sed 's/^# \{0,1\}//'; [[ -z $command || $command == -h || $command == --help ]] || exit 2 ;;
esac
