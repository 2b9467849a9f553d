#!/usr/bin/env bash
# scripts/simnodes.sh — simulated nodes on one machine: K "nodes", each its own network, mount, UTS
# and IPC namespace, so ranks on different nodes share no memory and reach each other only over TCP.
#
#   simnodes.sh check                  can namespaces be made here? exit 0, or 77 with the reason
#   simnodes.sh up K                   makes K nodes; prints the set's name (unique per run)
#   simnodes.sh exec NAME K -- CMD...  runs CMD on node K (cwd and environment kept)
#   simnodes.sh addr NAME K            node K's address
#   simnodes.sh agent NAME HOST CMD... an Open MPI rsh agent: runs CMD on the node whose address is HOST
#   simnodes.sh down NAME              removes the set; idempotent (nothing there is not an error)
#   simnodes.sh sweep                  removes the sets whose creating shell is gone
#   simnodes.sh run K -- CMD...        up, CMD on node 0 with the variables below, down (always)
#
# Each node has a veth link into a bridge that lives in the set's own "switch" namespace, so no
# address, route or link is added to the machine's own namespace and traffic never leaves the
# namespaces made here. A node gets the address 10.77.0.(K+1)/24 (the sets are apart: each has
# its own bridge), the host name NAME-nodeK (Team tells nodes apart by it), its own System V IPC,
# a private tmpfs on /dev/shm and an /etc/hosts that names every node (the machine's, plus a line
# per node), so node names resolve as on a cluster. The process ID namespace stays the machine's
# (the launcher watches its ranks), so a library that maps another process's memory through /proc
# or process_vm_readv still could: UCX does unless told UCX_TLS=tcp,self (the tests tell it). `run` gives CMD:
#   APERTURE_NODE_EXEC   "<this script> exec NAME {node} --": `aperture launch --nodes` prefixes
#                        each rank's command with it, {node} replaced by the rank's node
#   APERTURE_HUB_HOST    node 0's address: the launcher's hub listens there
#   SIMNODES_NAME, SIMNODES_HOSTFILE (an Open MPI hostfile, one line per node), SIMNODES_AGENT
#                        (the rsh agent for `mpirun --mca plm_rsh_agent`)
set -euo pipefail

self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
state_root=/run/aperture-simnodes
subnet=10.77.0

die() { echo "simnodes: $*" >&2; exit 1; }

node_ns() { echo "$1-n$2"; }
switch_ns() { echo "$1-sw"; }

check() {
  local why=""
  if [[ $(id -u) != 0 ]]; then why="not root (network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN)"
  elif ! command -v ip >/dev/null || ! command -v nsenter >/dev/null || ! command -v unshare >/dev/null; then
    why="ip, nsenter or unshare missing (apt-get install iproute2 util-linux)"
  else
    local probe="apchk$$"
    if ! ip netns add "$probe" 2>/dev/null; then why="ip netns add failed (no CAP_SYS_ADMIN, or a container without namespaces)"
    else
      ip -n "$probe" link add "${probe}a" type veth peer name "${probe}b" 2>/dev/null || why="veth links cannot be made (no veth module)"
      ip netns del "$probe" 2>/dev/null || true
    fi
  fi
  if [[ -n $why ]]; then echo "simulated nodes unavailable: $why"; return 77; fi
  return 0
}

up() {
  local k="$1"
  [[ $k =~ ^[0-9]+$ && $k -ge 1 && $k -le 32 ]] || die "up: K must be 1..32, got '$k'"
  check >/dev/null || { check; exit 77; }
  # Short (veth names are at most 15 bytes) and unique: the pid of this shell and a random tail.
  local name
  name="ap$(printf '%x' $$)$(printf '%04x' $((RANDOM)))"
  local dir="$state_root/$name"
  mkdir -p "$state_root"
  # Namespace files may only be bind-mounted on a mount whose propagation is private.
  if ! mountpoint -q "$state_root"; then
    mount --bind "$state_root" "$state_root"
    mount --make-private "$state_root"
  fi
  mkdir "$dir"
  echo "$PPID" >"$dir/owner"
  echo "$k" >"$dir/nodes"
  # Each node's /etc/hosts (bound over it by enter): node names resolve, as on a real cluster.
  cat /etc/hosts >"$dir/hosts" 2>/dev/null || true
  trap 'down "$name" >/dev/null 2>&1' ERR
  local sw; sw="$(switch_ns "$name")"
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  local i
  for ((i = 0; i < k; i++)); do
    local ns; ns="$(node_ns "$name" "$i")"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$ns" link add eth0 type veth peer name "p$i" netns "$sw"
    ip -n "$sw" link set "p$i" master br0
    ip -n "$sw" link set "p$i" up
    ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    mkdir "$dir/shm$i"
    mount -t tmpfs -o mode=1777,size=50% "$name-shm$i" "$dir/shm$i"
    touch "$dir/uts$i" "$dir/ipc$i"
    unshare --uts="$dir/uts$i" --ipc="$dir/ipc$i" hostname "$name-node$i"
    echo "$subnet.$((i + 1)) slots=64" >>"$dir/hostfile"
    echo "$subnet.$((i + 1)) $name-node$i" >>"$dir/hosts"
  done
  trap - ERR
  echo "$name"
}

enter() {  # enter NAME K CMD...: the node's namespaces, the caller's directory
  local name="$1" i="$2"; shift 2
  local dir="$state_root/$name"
  [[ -f $dir/uts$i ]] || die "no node $i in set '$name' (made by \`simnodes.sh up\`?)"
  # A fresh mount namespace per entry, in which /dev/shm is the node's own tmpfs (and /etc/hosts the
  # set's): every process of a node sees the same /dev/shm, no other node sees it. (A persistent
  # mount namespace per node would not do: one made earlier cannot see the namespace files of the
  # nodes made after it.)
  exec nsenter --net="/run/netns/$(node_ns "$name" "$i")" --uts="$dir/uts$i" --ipc="$dir/ipc$i" --wd="$PWD" -- \
    unshare --mount --propagation private -- \
    sh -c 'mount --bind "$0" /dev/shm && mount --bind "$1" /etc/hosts && shift && exec "$@"' "$dir/shm$i" "$dir/hosts" "$@"
}

agent() {  # Open MPI calls its rsh agent as: AGENT [ssh options] HOST COMMAND WORDS...
  local name="$1"; shift
  while [[ $# -gt 0 && $1 == -* ]]; do shift; done
  local host="$1"; shift
  local k; k="$(cat "$state_root/$name/nodes")"
  local i
  for ((i = 0; i < k; i++)); do
    [[ $host == "$subnet.$((i + 1))" ]] && enter "$name" "$i" sh -c "$*"
  done
  die "agent: no node of set '$name' has address '$host'"
}

down() {
  local name="$1"
  [[ $name =~ ^ap[0-9a-f]+$ ]] || die "down: '$name' is not a set's name"
  local dir="$state_root/$name" ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$name-(sw|n[0-9]+)$" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
  if [[ -d $dir ]]; then
    local f
    for f in "$dir"/uts* "$dir"/ipc* "$dir"/shm*; do
      [[ -e $f ]] || continue
      umount "$f" 2>/dev/null || true
    done
    rm -rf --one-file-system "$dir"
  fi
  # The last set gone: the private mount that held their namespace files goes too.
  if [[ -d $state_root ]] && ! compgen -G "$state_root/ap*" >/dev/null; then
    umount "$state_root" 2>/dev/null || true
    rmdir "$state_root" 2>/dev/null || true
  fi
}

sweep() {
  [[ -d $state_root ]] || return 0
  local dir
  for dir in "$state_root"/ap*; do
    [[ -d $dir ]] || continue
    local owner; owner="$(cat "$dir/owner" 2>/dev/null || echo 0)"
    kill -0 "$owner" 2>/dev/null || down "$(basename "$dir")"
  done
}

run() {
  local k="$1"; shift
  [[ ${1:-} == -- ]] && shift
  [[ $# -gt 0 ]] || die "run: no command given; write: simnodes.sh run 2 -- aperture launch --nodes 2 -n 4 -- prog"
  run_set="$(up "$k")" || exit $?
  local name="$run_set"
  trap 'down "$run_set"' EXIT
  trap 'exit 130' INT TERM
  local status=0
  SIMNODES_NAME="$name" SIMNODES_HOSTFILE="$state_root/$name/hostfile" \
    SIMNODES_AGENT="$self agent $name" APERTURE_NODE_EXEC="$self exec $name {node} --" \
    APERTURE_HUB_HOST="$subnet.1" "$self" exec "$name" 0 -- "$@" || status=$?
  return "$status"
}

command="${1:-}"
[[ $# -gt 0 ]] && shift
case "$command" in
  check) check ;;
  up) up "${1:?up K}" ;;
  exec)
    name="${1:?exec NAME K -- CMD}"; node="${2:?exec NAME K -- CMD}"; shift 2
    [[ ${1:-} == -- ]] && shift
    enter "$name" "$node" "$@" ;;
  addr) echo "$subnet.$((${2:?addr NAME K} + 1))" ;;
  agent) agent "$@" ;;
  down) down "${1:?down NAME}" ;;
  sweep) sweep ;;
  run) run "$@" ;;
  *) sed -n '2,26p' "$self" | sed 's/^# \{0,1\}//'; [[ -z $command || $command == -h || $command == --help ]] || exit 2 ;;
esac
