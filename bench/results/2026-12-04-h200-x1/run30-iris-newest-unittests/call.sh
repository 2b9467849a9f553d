#!/usr/bin/env bash
# Device call 1 of session 33: the package; aperture's changed iris tests at 1 rank; then every file
# of Iris's newest tests/unittests, unmodified, at 1 rank through `python -m aperture.iris`
# (test_zeros.py, the slow one whose every test spawns its ranks, beside the rest).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0
timeout 150 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1
echo "pip install: rc=$? ${SECONDS}s"
left=$((575 - SECONDS))
IRIS_SRC=.deps/iris-newest IRIS_RANKS=1 IRIS_ONLY='tests/unittests/test_zeros\.py' IRIS_UPSTREAM_LOGS=$OUT/zeros IRIS_JOBS=1 \
  IRIS_UPSTREAM_TIMEOUT=$((left - 10)) timeout $left bash scripts/iris-upstream.sh > $OUT/iris-zeros.txt 2>&1 &
zeros=$!
APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm" timeout 120 bash scripts/pytest-ranks.sh 1 -rs python/tests/test_iris_ccl.py \
  -k "newest_ccl_forms or amd_only or broadcast" > $OUT/np1.txt 2>&1
echo "aperture iris np1: rc=$? ${SECONDS}s"; tail -2 $OUT/np1.txt
left=$((575 - SECONDS))
IRIS_SRC=.deps/iris-newest IRIS_RANKS=1 IRIS_ONLY='tests/unittests/test_([a-y]|zeros_like)' IRIS_UPSTREAM_LOGS=$OUT/unit IRIS_JOBS=5 \
  IRIS_UPSTREAM_TIMEOUT=$((left - 10)) timeout $left bash scripts/iris-upstream.sh > $OUT/iris-unit.txt 2>&1
echo "iris-newest unittests np1: rc=$? ${SECONDS}s"
wait $zeros; echo "iris-newest test_zeros np1: rc=$? ${SECONDS}s"
(cd $OUT && tar czf iris-unit-logs.tgz unit zeros && rm -rf unit/*.log zeros/*.log)
grep -hE "np1 (PASS|FAIL|N/A)|passed,|failed" $OUT/iris-unit.txt $OUT/iris-zeros.txt | cut -c1-220
