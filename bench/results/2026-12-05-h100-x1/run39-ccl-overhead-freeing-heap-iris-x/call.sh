#!/usr/bin/env bash
# Device call 1 of session 40 (one H200): (1) iris.ccl's host overhead, alone on the machine, at 1
# rank with 41 rounds and at 2 ranks sharing the GPU with 11; (2) the host's engine test as two
# "nodes" with APERTURE_ENGINE=messages (no MPI window); (3) the vmem_chunked heap that frees
# (test_iris_host) at 1 rank and 2 sharing the GPU; (4) Iris's newest tests/x, tests/ops,
# tests/examples, examples and vmem allocator files, unmodified at 1 rank (scripts/iris-upstream.sh).
# Logs in one archive ($OUT/logs.tar.gz): the device tool returns a few files only.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SECONDS=0
L=/tmp/logs; mkdir -p $L
trap 'tar -C /tmp -czf $OUT/logs.tar.gz logs iris-newest 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout 170 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $L/install.log 2>&1
echo "pip install: rc=$? ${SECONDS}s"
launcher=$(python3 -c 'import aperture; print(aperture.program)')
for n in 1 2; do
  CUDA_VISIBLE_DEVICES=0 timeout 150 "$launcher" launch -n "$n" --timeout 145 -- python3 examples/iris/ccl_overhead.py \
    --iters $(( n == 1 ? 2000 : 100 )) --rounds $(( n == 1 ? 41 : 11 )) --csv $OUT/iris-ccl-overhead-np$n.csv \
    > $L/iris-ccl-overhead-np$n.txt 2>&1
  echo "ccl overhead np$n: rc=$? ${SECONDS}s"; grep -E "ccl_overhead:" $L/iris-ccl-overhead-np$n.txt | grep "rank 0" | cut -c1-120
done
CUDA_VISIBLE_DEVICES=0 APERTURE_ENGINE=messages APERTURE_TIMEOUT=20 APERTURE_HEAP_SIZE=256M \
  APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm" timeout 90 bash scripts/pytest-ranks.sh 2 --mpi --nodes 2 -rA --tb=short \
  python/tests/test_memory.py::test_the_host_reaches_ranks_of_other_nodes_through_the_engine > $L/nodes2-host-engine-messages.txt 2>&1
echo "2 nodes host engine (messages): rc=$? ${SECONDS}s"; grep -E "PASSED|FAILED|ERROR|passed|failed" $L/nodes2-host-engine-messages.txt | head -8
for n in 1 2; do
  CUDA_VISIBLE_DEVICES=0 APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm" timeout 90 bash scripts/pytest-ranks.sh $n -rA --tb=short \
    python/tests/test_iris_host.py -k "vmem_chunked or frees_nothing or closed_heap or heap_attributes" > $L/iris-host-freeing-np$n.txt 2>&1
  echo "test_iris_host freeing np$n: rc=$? ${SECONDS}s"; grep -E "^\[rank 0\] (PASSED|FAILED|ERROR|SKIPPED)|passed|failed" $L/iris-host-freeing-np$n.txt | head -8
done
left=$(( 575 - SECONDS ))
IRIS_SRC=.deps/iris-newest IRIS_RANKS=1 IRIS_ONLY='^tests/(x|ops|examples)/|^examples/|^tests/unittests/test_vmem' \
  IRIS_UPSTREAM_LOGS=/tmp/iris-newest IRIS_JOBS=4 IRIS_UPSTREAM_TIMEOUT=$(( left - 15 )) timeout $left \
  bash scripts/iris-upstream.sh > $L/iris-newest.txt 2>&1
echo "iris-newest x/ops/examples/vmem np1: rc=$? ${SECONDS}s"
grep -E "np1 (PASS|FAIL)|iris-upstream: (PASS|FAIL|[0-9]+ )" $L/iris-newest.txt | cut -c1-150 | tail -40
grep -c "np1 N/A" $L/iris-newest.txt
