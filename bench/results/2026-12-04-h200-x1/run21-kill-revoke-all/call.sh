#!/usr/bin/env bash
# Device call 2 of session 31:
# build; the four NCCL node-kill tests after revoking every communicator before any abort
# (nccl_between_nodes.cpp), then the core parts call 1 left: proxy, gpu, gemm, examples, churn.
set -uo pipefail
PYTHON_PREBUILD=0 GPU_CHECK_BUDGET_S=150 bash scripts/gpu-check.sh build > $OUT/build-console.txt 2>&1
echo "build: rc=$? ${SECONDS}s"
timeout 140 ctest --test-dir build-gpu -R 'node-kill.*nccl' --output-on-failure > $OUT/kill-nccl.txt 2>&1
echo "NCCL kill tests: rc=$? ${SECONDS}s"; grep -E "Test +#|tests passed" $OUT/kill-nccl.txt
NO_BUILD=1 LOG_DIR=$OUT/core GPU_CHECK_BUDGET_S=$((585 - SECONDS)) bash scripts/gpu-check.sh \
  proxy gpu gemm examples churn > $OUT/core-console.txt 2>&1
echo "gpu-check: rc=$? ${SECONDS}s"; tail -10 $OUT/core-console.txt
