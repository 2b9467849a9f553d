#!/usr/bin/env bash
# Device call 3 of session 39: Iris's newest tests/ccl files that session 38's barrier protocol and
# session 39's changes touch, unmodified at 1 rank (python -m aperture.iris, the tree rebuilt from
# scripts/iris-newest-SOURCES.txt), then iris.ccl's host overhead at 1 rank if time is left.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0
timeout 150 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1
echo "pip install: rc=$? ${SECONDS}s"
IRIS_SRC=.deps/iris-newest IRIS_RANKS=1 IRIS_ONLY='tests/ccl/test_(barrier|broadcast|all_reduce|graph_capture|functional_collectives|fused_ar_rmsnorm)\.py' \
  IRIS_UPSTREAM_LOGS=/tmp/iris-newest IRIS_JOBS=4 IRIS_UPSTREAM_TIMEOUT=$((300 - SECONDS)) timeout $((310 - SECONDS)) \
  bash scripts/iris-upstream.sh > $OUT/iris-newest.txt 2>&1
echo "iris-newest np1: rc=$? ${SECONDS}s"
tar -C /tmp -czf $OUT/iris-newest-logs.tgz iris-newest
grep -E "np1 (PASS|FAIL|N/A)|PASSED|FAILED" $OUT/iris-newest.txt | cut -c1-160
if [ $SECONDS -lt 320 ]; then
  launcher=$(python3 -c 'import aperture; print(aperture.program)')
  CUDA_VISIBLE_DEVICES=0 timeout 40 "$launcher" launch -n 1 --timeout 35 -- python3 examples/iris/ccl_overhead.py \
    --iters 2000 --rounds 11 --csv $OUT/iris-ccl-overhead-np1.csv > $OUT/iris-ccl-overhead-np1.txt 2>&1
  echo "ccl overhead np1: rc=$? ${SECONDS}s"; tail -9 $OUT/iris-ccl-overhead-np1.txt
fi
