#!/usr/bin/env bash
# Device calls 2 and 3 of session 46 (the machine of call 1, warm): scripts/gpu-check.sh PART whole
# within one call: `core` (after the H200's overhead runs), or `rest` with NO_BUILD=1 after `core`.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
part=${1:?core or rest}
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
GPU_CHECK_BUDGET_S=${BUDGET:-560} bash scripts/gpu-check.sh "$part" > $OUT/gpu-check-$part.txt 2>&1
echo "gpu-check $part: rc=$? ${SECONDS}s"
cat $OUT/gpu-check/summary.txt
