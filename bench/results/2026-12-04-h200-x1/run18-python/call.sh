#!/usr/bin/env bash
# Device call 3 of session 30: the Python part (pip install, np1, np2 sharing the GPU, Triton
# through the proxy as two nodes, Iris), then the Triton-proxy comparison alone in its smoke form.
set -uo pipefail
root=$PWD
GPU_CHECK_BUDGET_S=470 IRIS_RANKS=1 bash scripts/gpu-check.sh build python > $OUT/python-console.txt 2>&1
echo "gpu-check: rc=$? ${SECONDS}s"; tail -6 $OUT/python-console.txt
launcher=$(python3 -c 'import aperture; print(aperture.program)')
CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 APERTURE_HEAP_SIZE=256M APERTURE_TIMEOUT=100 \
  timeout 115 "$launcher" launch --mpi --nodes 2 -n 2 --timeout 110 -- python3 bench/python/triton_proxy.py \
  --provider cuda-ipc --rounds 3 --small-puts 100 --large-puts 4 > $OUT/smoke-triton-proxy.txt 2>&1
echo "triton-proxy smoke alone: rc=$? ${SECONDS}s"; tail -6 $OUT/smoke-triton-proxy.txt
