#!/usr/bin/env bash
# Device call 4 of session 30: build; the four NCCL node-kill tests, where a survivor that has
# not reported 2 s after the kill now prints every thread's stack (SIGUSR2).
set -uo pipefail
PYTHON_PREBUILD=0 GPU_CHECK_BUDGET_S=150 bash scripts/gpu-check.sh build > $OUT/build-console.txt 2>&1
echo "build: rc=$? ${SECONDS}s"
timeout 90 ctest --test-dir build-gpu -R 'node-kill.*nccl' --output-on-failure > $OUT/kill-nccl.txt 2>&1
echo "NCCL kill tests: rc=$? ${SECONDS}s"; grep -E "Test +#|tests passed|after the kill" $OUT/kill-nccl.txt
