#!/usr/bin/env bash
# Device call 1 of session 35/36: the package; at 1 rank with cuda-ipc and cuda-vmm, aperture.iris's
# test files added or changed in sessions 34-35 (iris.x with the vector and pipelining codegen,
# prefill, gemm, MoE, host helpers, device, ops.matmul, ccl UserAllReduce / reduce(t), bench,
# distributed, with their GPU variants); the ones that share the GPU at 2 ranks. About 150 + 290 +
# 130 s at most.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0
timeout 150 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1
echo "pip install: rc=$? ${SECONDS}s"
APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm" timeout 290 bash scripts/pytest-ranks.sh 1 -rs python/tests/test_iris_x*.py \
  python/tests/test_iris_moe.py python/tests/test_iris_host.py python/tests/test_iris_device.py \
  python/tests/test_iris_ops.py python/tests/test_iris_ccl.py python/tests/test_iris_bench.py \
  python/tests/test_iris_distributed.py > $OUT/np1.txt 2>&1
echo "aperture.iris np1: rc=$? ${SECONDS}s"; tail -3 $OUT/np1.txt
CUDA_VISIBLE_DEVICES=0 APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm" timeout 130 bash scripts/pytest-ranks.sh 2 -rs \
  python/tests/test_iris_moe.py python/tests/test_iris_host.py python/tests/test_iris_ccl.py python/tests/test_iris_ops.py \
  python/tests/test_iris_bench.py > $OUT/np2.txt 2>&1
echo "aperture.iris np2: rc=$? ${SECONDS}s"; tail -3 $OUT/np2.txt
