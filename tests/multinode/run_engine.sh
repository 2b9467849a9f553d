#!/usr/bin/env bash
# tests/multinode/run_engine.sh LAUNCHER ENGINE_TEST NODES RANKS [ARGS...] — the engine test
# as a real MPI job over simulated nodes: scripts/simnodes.sh makes NODES nodes, `aperture launch
# --mpi --hostfile` runs mpirun on node 0, and Open MPI starts its daemons on the other nodes
# through the simnodes rsh agent. Nothing but TCP between the nodes' addresses joins the ranks.
# Exit 77 (skipped) with the reason where namespaces cannot be made; afterwards no namespace,
# /dev/shm file or process of the job is left (checked).
set -euo pipefail
launcher="$1" program="$2" nodes="$3" ranks="$4"
shift 4
tool="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts" && pwd)/simnodes.sh"
if ! reason="$(bash "$tool" check)"; then  # APERTURE_SIMNODES_REQUIRE=1 (CI): cannot is a failure
  [[ ${APERTURE_SIMNODES_REQUIRE:-0} == 1 ]] && { echo "FAIL: APERTURE_SIMNODES_REQUIRE=1 and $reason"; exit 1; }
  echo "SKIP: $reason"; exit 77
fi
before_ns="$(ip netns list | sort)"
before_shm="$(ls /dev/shm | { grep -E 'ap[0-9a-f]+-node' || true; } | sort)"  # names of the simulated nodes: others' tests may add their own files
status=0
# UCX (Open MPI's one-sided transport here) would find the other nodes' processes on this
# machine and reach them through shared memory; on simulated nodes it must use TCP, as a
# cluster without a shared-memory path between nodes does.
export UCX_TLS=tcp,self
bash "$tool" run "$nodes" -- bash -c '
  launcher="$1" nodes="$2" ranks="$3"; shift 3
  OMPI_MCA_plm_rsh_agent="$SIMNODES_AGENT" exec "$launcher" launch --mpi --nodes "$nodes" \
    --hostfile "$SIMNODES_HOSTFILE" -n "$ranks" --timeout 300 -- "$@"' run_engine "$launcher" "$nodes" "$ranks" \
  "$program" "$@" || status=$?
[[ $(ip netns list | sort) == "$before_ns" ]] || { echo "FAIL: namespaces left behind"; status=1; }
[[ $(ls /dev/shm | { grep -E 'ap[0-9a-f]+-node' || true; } | sort) == "$before_shm" ]] || { echo "FAIL: /dev/shm files left behind"; status=1; }
exit "$status"
