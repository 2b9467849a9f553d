#!/usr/bin/env bash
# Device call 2 of session 33: the package; the files of Iris's newest tests/unittests that failed
# or did not finish in call 1, unmodified, at 1 rank (test_atomic_xor.py, whose tests spawn their
# ranks, beside the rest; then test_zeros.py's one test that lost a port race in call 1); every
# aperture.iris test file at 1 rank; the changed ones at 2 ranks sharing the GPU.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0
timeout 150 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1
echo "pip install: rc=$? ${SECONDS}s"
IRIS_SRC=.deps/iris-newest IRIS_RANKS=1 IRIS_ONLY='tests/unittests/test_atomic_xor\.py' IRIS_UPSTREAM_LOGS=$OUT/xor IRIS_JOBS=1 \
  IRIS_UPSTREAM_TIMEOUT=330 timeout 340 bash scripts/iris-upstream.sh > $OUT/iris-xor.txt 2>&1 &
xor=$!
rerun='tests/unittests/test_(device_context|device_context_cache_modifiers|load_cache_modifiers|arange|iris_helpers|copy|atomic_sub|atomic_min|vmem_allocator|vmem_chunked_allocator|allocate_symmetric|distributed_migration)\.py'
IRIS_SRC=.deps/iris-newest IRIS_RANKS=1 IRIS_ONLY="$rerun" IRIS_UPSTREAM_LOGS=$OUT/unit IRIS_JOBS=4 \
  IRIS_UPSTREAM_TIMEOUT=200 timeout 210 bash scripts/iris-upstream.sh > $OUT/iris-unit.txt 2>&1
echo "iris-newest unittests rerun np1: rc=$? ${SECONDS}s"
tests=(python/tests/test_iris*.py)
APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm" timeout 170 bash scripts/pytest-ranks.sh 1 -rs "${tests[@]}" > $OUT/np1.txt 2>&1
echo "aperture.iris np1: rc=$? ${SECONDS}s"; tail -2 $OUT/np1.txt
wait $xor; echo "iris-newest test_atomic_xor np1: rc=$? ${SECONDS}s"
(cd .deps/iris-newest && timeout 60 python3 -m aperture.iris -m pytest tests/unittests/test_zeros.py::test_zeros_out_parameter \
   --num_ranks 1 -q -rfEs -p no:cacheprovider --rootdir .) > $OUT/zeros-out-parameter.txt 2>&1
echo "iris-newest test_zeros_out_parameter np1: rc=$? ${SECONDS}s"; tail -1 $OUT/zeros-out-parameter.txt
left=$((585 - SECONDS))
CUDA_VISIBLE_DEVICES=0 APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm" timeout $left bash scripts/pytest-ranks.sh 2 -rs \
  python/tests/test_iris_tracing.py python/tests/test_iris_host.py python/tests/test_iris_ccl.py > $OUT/np2.txt 2>&1
echo "aperture.iris tracing/host/ccl np2: rc=$? ${SECONDS}s"; tail -2 $OUT/np2.txt
(cd $OUT && tar czf iris-unit-logs.tgz unit xor && rm -rf unit/*.log xor/*.log)
grep -hE "np1 (PASS|FAIL|N/A)|passed,|failed" $OUT/iris-unit.txt $OUT/iris-xor.txt | cut -c1-220
