#!/usr/bin/env bash
# Device call 3 of session 31 (same machine): the Python part (pip install, np1 with every GPU
# provider, np2 sharing the GPU, Triton through the proxy as two nodes, Iris incl. the new module
# forms of iris.ccl under mpirun, the Iris examples).
set -uo pipefail
GPU_CHECK_BUDGET_S=560 IRIS_RANKS=1 bash scripts/gpu-check.sh build python > $OUT/python-console.txt 2>&1
echo "gpu-check: rc=$? ${SECONDS}s"; tail -8 $OUT/python-console.txt
