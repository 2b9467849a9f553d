#!/usr/bin/env bash
# tests/multinode/launch_nodes_test.sh LAUNCHER — `aperture launch --nodes K` places ranks on
# nodes in rank blocks and every rank's Team agrees: node, local rank and local size per rank,
# and the layout `aperture info` prints. First split on this machine (APERTURE_NODE, the hub on
# loopback TCP), then on simulated nodes (each rank inside its node's namespaces, the hub on
# node 0's address) unless namespaces cannot be made here.
set -euo pipefail
launcher="$1"
tool="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts" && pwd)/simnodes.sh"
fail() { echo "FAIL: $*"; exit 1; }

check_layout() {  # OUTPUT: 5 ranks over 2 nodes are 0-2 and 3-4
  local out="$1"
  grep -q "nodes: 2 (node 0: ranks 0-2, node 1: ranks 3-4)" <<<"$out" || fail "no node layout in: $out"
  local r node local_rank
  for r in 0 1 2 3 4; do
    node=$((r < 3 ? 0 : 1)); local_rank=$((r < 3 ? r : r - 3))
    grep -q "^\[rank $r\] team: rank $r of 5 (local $local_rank of $((node == 0 ? 3 : 2)) on node $node)" <<<"$out" ||
      fail "rank $r's team line is wrong in: $out"
  done
}

out="$(env -u APERTURE_NODE_EXEC -u APERTURE_HUB_HOST "$launcher" launch --nodes 2 -n 5 --timeout 60 -- "$launcher" info 2>&1)" ||
  fail "launch --nodes 2 on this machine failed: $out"
check_layout "$out"
echo "ok: split on this machine"

# NCCL_HOSTID: a different one per split node (NCCL then treats the nodes as separate hosts), with
# and without --mpi; one the user set is kept; one node gets none. And the node's local rank and
# size (not the machine's), which a provider's status() reads before any Team exists: nccl refused
# two ranks of one GPU split into two nodes when they were mpirun's.
check_split_2x2() {  # MODE OUTPUT: ranks 0-1 on node 0, 2-3 on node 1
  local r
  for r in 0 1 2 3; do
    grep -q "^\[rank $r\] hostid $r aperture-node-$((r < 2 ? 0 : 1))$" <<<"$2" || fail "$1: rank $r's NCCL_HOSTID in: $2"
    grep -q "^\[rank $r\] local $r $((r % 2)) 2 $((r % 2)) 2$" <<<"$2" || fail "$1: rank $r's local rank and size in: $2"
  done
}
show_id='echo "hostid ${APERTURE_RANK:-$OMPI_COMM_WORLD_RANK} ${NCCL_HOSTID-unset}"'
show_place='echo "local ${APERTURE_RANK:-$OMPI_COMM_WORLD_RANK} $APERTURE_LOCAL_RANK $APERTURE_LOCAL_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE"'
out="$(env -u APERTURE_NODE_EXEC -u APERTURE_HUB_HOST -u NCCL_HOSTID "$launcher" launch --nodes 2 -n 4 --timeout 60 -- \
  sh -c "$show_id; $show_place" 2>&1)" || fail "launch --nodes 2 -n 4: $out"
check_split_2x2 "launch --nodes 2" "$out"
out="$(env -u APERTURE_NODE_EXEC -u APERTURE_HUB_HOST NCCL_HOSTID=mine "$launcher" launch --nodes 2 -n 2 --timeout 60 -- \
  sh -c "$show_id" 2>&1)" || fail "launch --nodes 2 -n 2: $out"
[[ $(grep -c "hostid [01] mine$" <<<"$out") == 2 ]] || fail "the user's NCCL_HOSTID was not kept: $out"
if command -v mpirun >/dev/null; then
  out="$(env -u NCCL_HOSTID -u APERTURE_NODES "$launcher" launch --mpi --nodes 2 -n 4 --timeout 60 -- \
    sh -c "$show_id; $show_place" 2>&1)" || fail "launch --mpi --nodes 2 -n 4: $out"
  check_split_2x2 "launch --mpi --nodes 2" "$out"
  out="$(env -u NCCL_HOSTID -u APERTURE_NODES "$launcher" launch --mpi -n 2 --timeout 60 -- sh -c "$show_id" 2>&1)" ||
    fail "launch --mpi -n 2: $out"
  [[ $(grep -c "hostid [01] unset$" <<<"$out") == 2 ]] || fail "one node got an NCCL_HOSTID: $out"
fi
echo "ok: NCCL_HOSTID, local rank and local size per node"

# The GPUs each split node sees (CUDA_VISIBLE_DEVICES; no GPU needed: the launcher only splits the
# list): with one GPU per rank, each node the GPUs of its ranks' block, with and without --mpi;
# with fewer GPUs than ranks every node sees them all; on one node nothing changes.
show_gpus='echo "gpus ${APERTURE_RANK:-$OMPI_COMM_WORLD_RANK} ${CUDA_VISIBLE_DEVICES-unset}"'
check_gpus() {  # MODE OUTPUT EXPECTED...: rank r's line must read EXPECTED[r]
  local mode="$1" out="$2" r=0 want
  shift 2
  for want in "$@"; do
    grep -q "^\[rank $r\] gpus $r $want$" <<<"$out" || fail "$mode: rank $r should see GPUs '$want' in: $out"
    r=$((r + 1))
  done
}
out="$(env -u APERTURE_NODE_EXEC -u APERTURE_HUB_HOST CUDA_VISIBLE_DEVICES=g0,g1,g2,g3,g4 "$launcher" launch --nodes 2 \
  -n 5 --timeout 60 -- sh -c "$show_gpus" 2>&1)" || fail "launch --nodes 2 -n 5 (GPUs): $out"
check_gpus "launch --nodes 2 -n 5, 5 GPUs" "$out" g0,g1,g2 g0,g1,g2 g0,g1,g2 g3,g4 g3,g4
out="$(env -u APERTURE_NODE_EXEC -u APERTURE_HUB_HOST CUDA_VISIBLE_DEVICES=g0,g1 "$launcher" launch --nodes 2 -n 4 \
  --timeout 60 -- sh -c "$show_gpus" 2>&1)" || fail "launch --nodes 2 -n 4 (2 GPUs): $out"
check_gpus "launch --nodes 2 -n 4, 2 GPUs" "$out" g0,g1 g0,g1 g0,g1 g0,g1
out="$(env -u APERTURE_NODE_EXEC -u APERTURE_HUB_HOST CUDA_VISIBLE_DEVICES=g0,g1 "$launcher" launch -n 2 --timeout 60 -- \
  sh -c "$show_gpus" 2>&1)" || fail "launch -n 2 (GPUs): $out"
check_gpus "launch -n 2, one node" "$out" g0,g1 g0,g1
if command -v mpirun >/dev/null; then
  out="$(env -u APERTURE_NODES CUDA_VISIBLE_DEVICES=g0,g1,g2 "$launcher" launch --mpi --nodes 2 -n 3 --timeout 60 -- \
    sh -c "$show_gpus" 2>&1)" || fail "launch --mpi --nodes 2 -n 3 (GPUs): $out"
  check_gpus "launch --mpi --nodes 2 -n 3, 3 GPUs" "$out" g0,g1 g0,g1 g2
fi
echo "ok: each split node sees its own GPUs where there is one per rank"

# Bad shapes are refused with the reason.
err="$("$launcher" launch --nodes 3 -n 2 -- true 2>&1)" && fail "--nodes 3 -n 2 was accepted"
grep -q "more nodes than" <<<"$err" || fail "--nodes 3 -n 2: $err"

if ! reason="$(bash "$tool" check)"; then  # APERTURE_SIMNODES_REQUIRE=1 (CI): cannot is a failure
  [[ ${APERTURE_SIMNODES_REQUIRE:-0} == 1 ]] && { echo "FAIL: APERTURE_SIMNODES_REQUIRE=1 and $reason"; exit 1; }
  echo "SKIP (simulated nodes): $reason"; exit 0
fi
before="$(ip netns list | sort)"
out="$(bash "$tool" run 2 -- "$launcher" launch --nodes 2 -n 5 --timeout 60 -- sh -c \
  'echo "host $APERTURE_RANK $(hostname)"; exec "$0" info' "$launcher" 2>&1)" || fail "launch on simulated nodes failed: $out"
check_layout "$out"
for r in 0 1 2 3 4; do
  grep -q "^\[rank $r\] host $r ap[0-9a-f]*-node$((r < 3 ? 0 : 1))$" <<<"$out" || fail "rank $r ran on the wrong node: $out"
done
[[ $(ip netns list | sort) == "$before" ]] || fail "namespaces left behind"
echo "ok: simulated nodes"
echo "PASS"
