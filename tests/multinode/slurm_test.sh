#!/usr/bin/env bash
# tests/multinode/slurm_test.sh APERTURE COLLECTIVES_TEST ENGINE_TEST — ranks started by Slurm's
# srun, with no launcher of aperture's, on a real Slurm cluster of 2 simulated nodes
# (slurm_cluster.sh):
#   - `srun --mpi=pmix`: MPI learns the job from srun, so the collectives between nodes run on
#     MPI: every collective, type and reduction checked (collectives_nodes_test), 2+2 ranks;
#     `aperture info` at srun's own packing (3+1) says every rank's node; the MPI engine reaches
#     the other node's memory, every operation (engine_test, 1+1 ranks, 20 rounds);
#   - `srun` without PMIx: aperture's rendezvous on the step's first node (its name resolved as on
#     a cluster); `aperture info` gives every rank once, over both nodes; the collectives between
#     nodes, which need MPI, refuse on every rank, naming `srun --mpi=pmix`;
#   - `aperture launch --mpi` inside an allocation (salloc): mpirun reads Slurm's nodes, and the
#     collectives between nodes run over TCP, every element;
#   - task 0 placed off the step's first node (--distribution=arbitrary): task 0 says so, naming
#     MASTER_ADDR, and the job ends in time.
# Exit 77 (skipped) where Slurm or namespaces are missing, unless APERTURE_SLURM_REQUIRE=1 (CI: a
# failure); afterwards no namespace, /dev/shm file or daemon of the cluster is left (checked).
set -uo pipefail
aperture="$1" collectives="$2" engine="$3"
cluster="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/slurm_cluster.sh"
if ! reason="$(bash "$cluster" check)"; then
  [[ ${APERTURE_SLURM_REQUIRE:-0} == 1 ]] && { echo "FAIL: APERTURE_SLURM_REQUIRE=1 and $reason"; exit 1; }
  echo "SKIP: $reason"; exit 77
fi
failures=0 passed=0
ok() { passed=$((passed + 1)); echo "ok   - $1"; }
fail() { failures=$((failures + 1)); echo "FAIL - $1"; }

before_ns="$(ip netns list | sort)"
envfile="$(bash "$cluster" up 2)" || { echo "FAIL: the cluster did not come up"; exit 1; }
dir="$(dirname "$envfile")"
trap 'bash "$cluster" down "$dir"' EXIT
source "$envfile"
# UCX would reach the other node's ranks through this machine's shared memory: TCP, as between
# real nodes. Open MPI's single-copy path off, as in CI's other MPI tests.
export UCX_TLS=tcp,self OMPI_MCA_btl_vader_single_copy_mechanism=none APERTURE_HEAP_SIZE=64M APERTURE_TIMEOUT=60
run_srun() { timeout 300 bash "$cluster" srun "$dir" -- "$@" 2>&1; }

# every_rank_once OUTPUT N: `aperture info`'s team line of each rank 0..N-1, exactly once, started by srun.
every_rank_once() {
  local out="$1" n="$2" r
  for ((r = 0; r < n; r++)); do
    [[ $(grep -c "team: rank $r of $n (local [0-9] of [0-9] on node [01]), started by srun" <<<"$out") == 1 ]] || return 1
  done
}

out="$(run_srun -N2 -n4 --ntasks-per-node=2 --mpi=pmix env APERTURE_TEST_EXPECT_BETWEEN_NODES=mpi "$collectives")"
if [[ $(grep -c "^PASS collectives across nodes" <<<"$out") == 4 ]] && grep -q "4 ranks as 2+2" <<<"$out"; then
  ok "srun --mpi=pmix, 2+2: every collective between nodes on MPI, every element"
else
  fail "srun --mpi=pmix, 2+2 collectives: $out"
fi

out="$(run_srun -N2 -n4 --mpi=pmix "$aperture" info)"
if every_rank_once "$out" 4 && grep -q "nodes: 2 (node 0: ranks 0-2, node 1: ranks 3)" <<<"$out" &&
   grep -q "mpi-window  *available" <<<"$out"; then
  ok "srun --mpi=pmix, srun's packing (3+1): every rank's node, mpi-window available"
else
  fail "srun --mpi=pmix aperture info: $out"
fi

out="$(run_srun -N2 -n2 --mpi=pmix "$engine" 20)"
if grep -q "^\[  PASSED  \] 1 test" <<<"$out" && ! grep -q "FAILED" <<<"$out"; then
  ok "srun --mpi=pmix, 1+1: the MPI engine reaches the other node, every operation"
else
  fail "srun --mpi=pmix engine test: $out"
fi

out="$(run_srun -N2 -n4 --ntasks-per-node=2 --mpi=none "$aperture" info)"
if every_rank_once "$out" 4 && grep -q "nodes: 2 (node 0: ranks 0-1, node 1: ranks 2-3)" <<<"$out"; then
  ok "srun without PMIx: the job forms on the step's first node, both nodes"
else
  fail "srun without PMIx, aperture info: $out"
fi

out="$(run_srun -N2 -n4 --ntasks-per-node=2 --mpi=none "$collectives")"
if [[ $(grep -c "the collectives between nodes run on MPI, but its ranks were started by srun" <<<"$out") == 4 ]] &&
   grep -q "srun --mpi=pmix" <<<"$out" && ! grep -q "^PASS" <<<"$out"; then
  ok "srun without PMIx: the collectives between nodes refuse on every rank, naming srun --mpi=pmix"
else
  fail "srun without PMIx, collectives: $out"
fi

# mpirun inside an allocation, as docs/MULTINODE.md offers too: it reads Slurm's nodes itself, and
# `aperture launch --mpi` lets its ranks meet over TCP there.
out="$(timeout 300 bash "$cluster" salloc "$dir" -- -N2 -n4 --ntasks-per-node=2 "$aperture" launch --mpi -n 4 -- \
  "$collectives" 2>&1)"
if [[ $(grep -c "PASS collectives across nodes" <<<"$out") == 4 ]] && grep -q "4 ranks as 2+2" <<<"$out"; then
  ok "aperture launch --mpi inside an allocation (salloc): every collective between nodes"
else
  fail "aperture launch --mpi inside salloc: $out"
fi

# There torch.distributed's MASTER_ADDR is the user's (rank 0's node), on every rank.
out="$(MASTER_ADDR="$SIMNODES_NAME-node0" timeout 120 bash "$cluster" salloc "$dir" -- -N2 -n4 --ntasks-per-node=2 \
  "$aperture" launch --mpi -n 4 -- sh -c 'echo "master ${MASTER_ADDR-unset} on $(hostname)"' 2>&1)"
if [[ $(grep -c "master $SIMNODES_NAME-node0 on $SIMNODES_NAME-node[01]$" <<<"$out") == 4 ]] &&
   grep -q "on $SIMNODES_NAME-node1$" <<<"$out"; then
  ok "aperture launch --mpi inside an allocation keeps the user's MASTER_ADDR on every node"
else
  fail "MASTER_ADDR inside salloc: $out"
fi

# Task 0 on node 1, task 1 on node 0: the others would look for the rendezvous on node 0.
hosts="$dir/arbitrary-hosts"
printf '%s\n%s\n' "$SIMNODES_NAME-node1" "$SIMNODES_NAME-node0" > "$hosts"
start=$SECONDS
out="$(APERTURE_TIMEOUT=5 run_srun -n2 -w "$hosts" --distribution=arbitrary --mpi=none \
  --kill-on-bad-exit=1 "$aperture" info)"
if grep -q "srun started task 0 on node '$SIMNODES_NAME-node1'" <<<"$out" && grep -q "set MASTER_ADDR" <<<"$out" &&
   (( SECONDS - start <= 30 )); then
  ok "task 0 off the step's first node: named, with MASTER_ADDR, in $((SECONDS - start)) s"
else
  fail "task 0 off the first node: after $((SECONDS - start)) s: $out"
fi

trap - EXIT
bash "$cluster" down "$dir"
[[ $(ip netns list | sort) == "$before_ns" ]] || fail "namespaces left behind"
[[ ! -e $dir ]] || fail "the cluster's directory left behind"
leftover="$(ps -eo stat=,args= | awk '$1 !~ /^Z/' | grep -F "$dir" | grep -v grep || true)"
[[ -z $leftover ]] || fail "processes of the cluster left: $leftover"
echo "slurm: $passed passed, $failures failed"
(( failures == 0 ))
