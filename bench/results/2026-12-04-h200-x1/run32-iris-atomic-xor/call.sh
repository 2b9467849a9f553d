#!/usr/bin/env bash
# Device call 3 of session 33: the package; Iris's newest tests/unittests/test_atomic_xor.py (72 tests,
# each spawning its ranks), unmodified, at 1 rank, alone (call 2 ran out of time at 56 of 72, all passing).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0
timeout 150 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1
echo "pip install: rc=$? ${SECONDS}s"
left=$((590 - SECONDS))
IRIS_SRC=.deps/iris-newest IRIS_RANKS=1 IRIS_ONLY='tests/unittests/test_atomic_xor\.py' IRIS_UPSTREAM_LOGS=$OUT/xor IRIS_JOBS=1 \
  IRIS_UPSTREAM_TIMEOUT=$((left - 5)) timeout $left bash scripts/iris-upstream.sh > $OUT/iris-xor.txt 2>&1
echo "iris-newest test_atomic_xor np1: rc=$? ${SECONDS}s"
(cd $OUT && tar czf iris-xor-logs.tgz xor && rm -rf xor/*.log)
grep -hE "np1 (PASS|FAIL|N/A)|passed,|failed" $OUT/iris-xor.txt | cut -c1-220
