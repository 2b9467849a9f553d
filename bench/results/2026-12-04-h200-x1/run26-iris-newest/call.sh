#!/usr/bin/env bash
# Device call 3 of session 32: the package; aperture's Iris compile and ccl tests (whole files) at 1
# rank and at 2 ranks sharing the GPU; then every file of Iris's newest tests/ccl, unmodified, at 1
# rank through `python -m aperture.iris` (iris-upstream.sh: Gluon files and cases, MoE dispatch and
# tests that need more ranks are N/A by name; test_barrier_state_reuse deselected: Iris internals).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0
timeout 150 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1
echo "pip install: rc=$? ${SECONDS}s"
tests=(python/tests/test_iris_compile.py python/tests/test_iris_ccl.py)
APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm" timeout 150 bash scripts/pytest-ranks.sh 1 -rs "${tests[@]}" > $OUT/np1.txt 2>&1
echo "np1: rc=$? ${SECONDS}s"; tail -2 $OUT/np1.txt
CUDA_VISIBLE_DEVICES=0 APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm" timeout 120 bash scripts/pytest-ranks.sh 2 -rs \
  "${tests[@]}" > $OUT/np2.txt 2>&1
echo "np2: rc=$? ${SECONDS}s"; tail -2 $OUT/np2.txt
IRIS_SRC=.deps/iris-newest IRIS_RANKS=1 IRIS_ONLY='tests/ccl/' IRIS_UPSTREAM_LOGS=$OUT/iris-newest IRIS_JOBS=4 \
  IRIS_UPSTREAM_TIMEOUT=$((570 - SECONDS)) timeout $((585 - SECONDS)) bash scripts/iris-upstream.sh > $OUT/iris-newest.txt 2>&1
echo "iris-newest np1: rc=$? ${SECONDS}s"
(cd $OUT && tar czf iris-newest-logs.tgz iris-newest && rm -f iris-newest/*.log)
grep -E "np1 (PASS|FAIL|N/A)|passed,|deselected" $OUT/iris-newest.txt | cut -c1-200
