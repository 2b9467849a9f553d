#!/usr/bin/env bash
# Device call 2 of session 30: build; the parts this session's changes touch (proxy: the NCCL
# node-kill tests after the abort fix, and the windowed proxy queue; gpu; sanitize; gemm;
# examples; churn). collectives and bulk (unchanged code, 186 s) are left for the next session.
set -uo pipefail
PYTHON_PREBUILD=0 GPU_CHECK_BUDGET_S=585 bash scripts/gpu-check.sh build proxy gpu sanitize gemm examples churn \
  > $OUT/core-console.txt 2>&1
echo "gpu-check: rc=$? ${SECONDS}s"; tail -12 $OUT/core-console.txt
