#!/usr/bin/env bash
# Device call 1 of session 31: build; the four NCCL node-kill tests first (is the revoke change
# of a50578d/7532b04 enough?), then the core parts except sanitize (host-side changes only since
# run 17's sanitize pass): collectives, bulk, proxy, gpu, gemm, examples, churn.
set -uo pipefail
PYTHON_PREBUILD=0 GPU_CHECK_BUDGET_S=150 bash scripts/gpu-check.sh build > $OUT/build-console.txt 2>&1
echo "build: rc=$? ${SECONDS}s"
timeout 100 ctest --test-dir build-gpu -R 'node-kill.*nccl' --output-on-failure > $OUT/kill-nccl.txt 2>&1
echo "NCCL kill tests: rc=$? ${SECONDS}s"; grep -E "Test +#|tests passed" $OUT/kill-nccl.txt
NO_BUILD=1 LOG_DIR=$OUT/core GPU_CHECK_BUDGET_S=$((585 - SECONDS)) bash scripts/gpu-check.sh \
  collectives bulk proxy gpu gemm examples churn > $OUT/core-console.txt 2>&1
echo "gpu-check: rc=$? ${SECONDS}s"; tail -10 $OUT/core-console.txt
