#!/usr/bin/env bash
# One device call: build (and the package, in the background); the proxy part alone (the new
# 2-ranks-per-node node-kill tests, nccl windows as two nodes); then Iris's test_zeros at 1 rank.
set -uo pipefail
cd "$(dirname "$0")/.."
L=/tmp/c10; mkdir -p $L
snap() { tar czf $OUT/logs.tgz -C /tmp c10 2>/dev/null; }
PYTHON_PREBUILD=0 LOG_DIR=$L/build GPU_CHECK_BUDGET_S=200 bash scripts/gpu-check.sh build > $L/build.txt 2>&1; echo "build rc=$? ${SECONDS}s"; snap
CMAKE_BUILD_PARALLEL_LEVEL=8 python3 -m pip install --no-build-isolation --no-deps --no-index . > $L/pip.txt 2>&1 &
pip_job=$!
NO_BUILD=1 PYTHON_PREBUILD=0 LOG_DIR=$L/proxy GPU_CHECK_BUDGET_S=200 bash scripts/gpu-check.sh proxy > $L/proxy.txt 2>&1
echo "proxy rc=$? ${SECONDS}s"; snap
grep -E "Test +#|tests passed|FAILED" $L/proxy/proxy.log | cut -c1-150 | tail -34
wait $pip_job; echo "pip rc=$? ${SECONDS}s"
left=$(( ${TOTAL_S:-540} - SECONDS - 10 ))
echo "iris test_zeros with ${left}s"
IRIS_ONLY=test_zeros NO_BUILD=1 IRIS_RANKS=1 LOG_DIR=$L/iris GPU_CHECK_BUDGET_S=$left timeout $left \
  bash scripts/gpu-check.sh iris-upstream > $L/iris.txt 2>&1; echo "iris rc=$? ${SECONDS}s"; snap
tail -8 $L/iris.txt | cut -c1-300
