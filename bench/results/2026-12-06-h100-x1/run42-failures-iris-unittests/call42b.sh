#!/usr/bin/env bash
# Device call 2 of session 42 (one GPU, right after call 1 on the warm machine): Iris's newest
# test_vmem* files at 1 rank; its tests/unittests files whose tests spawn their own ranks at 2
# ranks sharing the GPU; the other tests/unittests files at 1 rank with the time left.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SECONDS=0
L=/tmp/logs; mkdir -p $L
trap 'tar -C /tmp -czf $OUT/logs.tar.gz logs iris-vmem iris-np2 iris-np1 2>/dev/null' EXIT
python3 -c 'import aperture.iris.concurrent' 2>/dev/null && echo "aperture installed (warm machine)" || {
  timeout 170 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
    > $L/install.log 2>&1; echo "pip install: rc=$? ${SECONDS}s"; }
IRIS_SRC=.deps/iris-newest IRIS_RANKS=1 IRIS_ONLY='^tests/unittests/test_vmem' \
  IRIS_UPSTREAM_LOGS=/tmp/iris-vmem IRIS_JOBS=2 IRIS_UPSTREAM_TIMEOUT=110 timeout 120 \
  bash scripts/iris-upstream.sh > $L/iris-vmem-np1.txt 2>&1
echo "iris-newest vmem np1: rc=$? ${SECONDS}s"
grep -E "np1 (PASS|FAIL|N/A)|iris-upstream: [0-9]+ passed" $L/iris-vmem-np1.txt | cut -c1-170
IRIS_SRC=.deps/iris-newest IRIS_RANKS=2 IRIS_ONLY='^tests/unittests/test_(atomic_xor|iris_helpers|load|logging|put)\.py' \
  IRIS_UPSTREAM_LOGS=/tmp/iris-np2 IRIS_JOBS=3 IRIS_UPSTREAM_TIMEOUT=150 timeout 165 \
  bash scripts/iris-upstream.sh > $L/iris-unittests-spawn-np2.txt 2>&1
echo "iris-newest spawn files np2: rc=$? ${SECONDS}s"
grep -E "np2 (PASS|FAIL|N/A)|iris-upstream: [0-9]+ passed" $L/iris-unittests-spawn-np2.txt | cut -c1-170
left=$(( 575 - SECONDS ))
[ $left -gt 40 ] || { echo "iris-newest unittests np1: no time left (${SECONDS}s)"; exit 0; }
rest=$(cd .deps/iris-newest/tests/unittests && ls test_*.py | grep -vE '^test_((atomic_xor|iris_helpers|load|logging|put)\.py|vmem|utils\.py)' | paste -sd'|' | sed 's/\./\\./g')
IRIS_SRC=.deps/iris-newest IRIS_RANKS=1 IRIS_ONLY="^tests/unittests/($rest)\$" \
  IRIS_UPSTREAM_LOGS=/tmp/iris-np1 IRIS_JOBS=4 IRIS_UPSTREAM_TIMEOUT=$(( left - 15 )) timeout $left \
  bash scripts/iris-upstream.sh > $L/iris-unittests-np1.txt 2>&1
echo "iris-newest unittests np1: rc=$? ${SECONDS}s"
grep -E "np1 (PASS|FAIL)|iris-upstream: [0-9]+ passed" $L/iris-unittests-np1.txt | cut -c1-170
grep -c "np1 N/A" $L/iris-unittests-np1.txt
