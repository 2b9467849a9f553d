#!/usr/bin/env bash
# Device call 2 of session 42 (the warm machine of call 1): call 1's failures again with long
# tracebacks, then call42b.sh's Iris runs with the time left.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm"
mkdir -p $OUT/fail
CUDA_VISIBLE_DEVICES=0 timeout 60 bash scripts/pytest-ranks.sh 1 -rA --tb=long python/tests/test_iris_host.py \
  -k vmem_chunked_grows > $OUT/fail/heap-growth-np1.txt 2>&1; echo "heap growth np1: rc=$?"
CUDA_VISIBLE_DEVICES=0 timeout 60 bash scripts/pytest-ranks.sh 1 -rA --tb=long python/tests/test_iris_concurrent.py \
  -k "other_types and bfloat16" > $OUT/fail/concurrent-bf16-np1.txt 2>&1; echo "concurrent bf16 np1: rc=$?"
grep -E "^E |Error" $OUT/fail/*.txt | head -20
sed -i 's/^left=$(( 575 - SECONDS ))/left=$(( 440 - SECONDS ))/' .deps/call42b.sh
bash .deps/call42b.sh
