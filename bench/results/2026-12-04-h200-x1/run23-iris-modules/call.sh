#!/usr/bin/env bash
# Device call 4 of session 31 (the session's last ~300 device seconds): the package, then the new
# Iris module forms and autotune API on the GPU: the fused GEMM module forms (GPU only), the
# fused all_reduce_rmsnorm module form compiled, and the ccl module forms, at 1 rank and at 2
# ranks sharing the GPU (cuda-ipc).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0
timeout 150 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1
echo "pip install: rc=$? ${SECONDS}s"
tests=(python/tests/test_iris_fused_gemm.py python/tests/test_iris_ccl.py python/tests/test_iris_ranks.py)
select='module or rmsnorm_preamble or autotune or newest or gathers or keeps'
APERTURE_TEST_GPU_PROVIDERS=cuda-ipc timeout $((235 - SECONDS)) bash scripts/pytest-ranks.sh 1 -rs -k "$select" \
  "${tests[@]}" > $OUT/np1.txt 2>&1
echo "np1: rc=$? ${SECONDS}s"; tail -3 $OUT/np1.txt
CUDA_VISIBLE_DEVICES=0 APERTURE_TEST_GPU_PROVIDERS=cuda-ipc timeout $((245 - SECONDS)) bash scripts/pytest-ranks.sh 2 -rs \
  -k "$select" "${tests[@]}" > $OUT/np2.txt 2>&1
echo "np2: rc=$? ${SECONDS}s"; tail -4 $OUT/np2.txt
