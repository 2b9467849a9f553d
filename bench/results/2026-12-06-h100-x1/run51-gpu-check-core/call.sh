#!/usr/bin/env bash
# Device call 1 of session 45 (one GPU): scripts/gpu-check.sh core, whole, within one call, to get
# every part's time on today's tree (the next call runs `rest` on the same machine, NO_BUILD=1).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
GPU_CHECK_BUDGET_S=${CORE_BUDGET:-570} bash scripts/gpu-check.sh core > $OUT/gpu-check-core.txt 2>&1
echo "gpu-check core: rc=$? ${SECONDS}s"
cat $OUT/gpu-check/summary.txt
