#!/usr/bin/env bash
# Device call 1 of session 32: the package, then the Iris ccl, fused GEMM and rmsnorm tests whole
# (the unfused fallback of the fused GEMM ops, their refusals, all_to_all_v and the rmsnorm
# ValueErrors have not run on a GPU before) at 1 rank and at 2 ranks sharing the GPU, on
# cuda-ipc and cuda-vmm.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
timeout 150 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1
echo "pip install: rc=$? ${SECONDS}s"
tests=(python/tests/test_iris_fused_gemm.py python/tests/test_iris_ccl.py python/tests/test_iris_ranks.py)
select='not test_iris_ranks or rmsnorm'
APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm" timeout $((370 - SECONDS)) bash scripts/pytest-ranks.sh 1 -rs \
  -k "$select" "${tests[@]}" > $OUT/np1.txt 2>&1
echo "np1: rc=$? ${SECONDS}s"; tail -3 $OUT/np1.txt
CUDA_VISIBLE_DEVICES=0 APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm" timeout $((585 - SECONDS)) bash scripts/pytest-ranks.sh 2 -rs \
  -k "$select" "${tests[@]}" > $OUT/np2.txt 2>&1
echo "np2: rc=$? ${SECONDS}s"; tail -4 $OUT/np2.txt
