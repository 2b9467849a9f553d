#!/usr/bin/env bash
# One device call (session 30): build; the proxy part alone (the NCCL node-kill tests print a
# stuck survivor's stacks); the same four tests with NCCL_RUNTIME_CONNECT=0; then the Python
# package and the 2-rank iris.ccl overhead, alone on the GPU.
set -uo pipefail
root=$PWD
PYTHON_PREBUILD=0 GPU_CHECK_BUDGET_S=330 bash scripts/gpu-check.sh build proxy > $OUT/core-console.txt 2>&1
echo "build+proxy: rc=$? ${SECONDS}s"; tail -4 $OUT/core-console.txt
b=$root/build-gpu
NCCL_RUNTIME_CONNECT=0 timeout 120 ctest --test-dir $b -R 'node-kill.*nccl' --output-on-failure > $OUT/kill-nccl-runtime-connect-0.txt 2>&1
echo "NCCL_RUNTIME_CONNECT=0 kill tests: rc=$? ${SECONDS}s"; grep -E "Test +#|tests passed" $OUT/kill-nccl-runtime-connect-0.txt
env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) timeout 200 python3 -m pip install --no-build-isolation --no-deps --no-index $root > $OUT/pip.log 2>&1
echo "pip: rc=$? ${SECONDS}s"
launcher=$(python3 -c 'import aperture; print(aperture.program)')
CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 timeout 110 "$launcher" launch -n 2 --timeout 100 -- python3 \
  examples/iris/ccl_overhead.py --iters 100 --csv $OUT/iris-ccl-overhead-np2.csv > $OUT/iris-ccl-overhead-np2.txt 2>&1
echo "ccl_overhead np2 alone: rc=$? ${SECONDS}s"; tail -12 $OUT/iris-ccl-overhead-np2.txt
