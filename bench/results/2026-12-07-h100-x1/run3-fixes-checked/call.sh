#!/usr/bin/env bash
# Device call 3 of session 51 (lean): pip install; the rmsnorm and launch tests at 1 rank and
# rmsnorm at 2 (the C launch's results: repeated calls launch directly); the fast reduce-scatter
# tests (fixed) at 2 ranks.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
timeout 150 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1; echo "pip install: rc=$? ${SECONDS}s"
timeout 40 bash scripts/pytest-ranks.sh 1 -q -rs -k "rmsnorm or launch" python/tests/test_iris_ranks.py \
  > $OUT/np1-rmsnorm.log 2>&1; echo "np1 rmsnorm: rc=$? ${SECONDS}s"; tail -2 $OUT/np1-rmsnorm.log
timeout 45 bash scripts/pytest-ranks.sh 2 -q -rs -k rmsnorm python/tests/test_iris_ranks.py \
  > $OUT/np2-rmsnorm.log 2>&1; echo "np2 rmsnorm: rc=$? ${SECONDS}s"; grep -E "passed|failed|\.\.\." $OUT/np2-rmsnorm.log | tail -2
timeout 40 bash scripts/pytest-ranks.sh 2 -q -rs -k fast python/tests/test_iris_ops.py python/tests/test_iris_ops_extras.py \
  > $OUT/np2-ops-fast.log 2>&1; echo "np2 ops fast: rc=$? ${SECONDS}s"; grep -E "passed|failed|Error|\.\.\." $OUT/np2-ops-fast.log | tail -3
echo "done ${SECONDS}s"
