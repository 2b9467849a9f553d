#!/usr/bin/env bash
# Device call of session 47: all_reduce_rmsnorm's direct launch hands its pointers as addresses.
# Its host time broken down again (.deps/prof_rmsnorm.py, as the call before the change), the
# rmsnorm bench at 1 rank, and the tests that run the fused kernel on the GPU at 1 and 2 ranks.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
timeout 200 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1; echo "pip install: rc=$? ${SECONDS}s"
ap=$(python3 -c 'import aperture; print(aperture.program)')
for rows in 32 1; do
  timeout 100 $ap launch -n 1 --timeout 90 -- python3 .deps/prof_rmsnorm.py $rows > $OUT/prof$rows.txt 2>&1
  echo "prof $rows rows: rc=$? ${SECONDS}s"; grep -E "median" $OUT/prof$rows.txt
done
timeout 120 $ap launch -n 1 --timeout 110 -- python3 bench/python/iris_rmsnorm.py --iters 200 --csv $OUT/iris-rmsnorm-np1.csv \
  > $OUT/iris-rmsnorm-np1.txt 2>&1; echo "bench np1: rc=$? ${SECONDS}s"; tail -10 $OUT/iris-rmsnorm-np1.txt
timeout 120 bash scripts/pytest-ranks.sh 1 -q -rs -k rmsnorm python/tests/test_iris_ccl.py python/tests/test_iris_ranks.py \
  > $OUT/np1.log 2>&1; echo "np1 rmsnorm tests: rc=$? ${SECONDS}s"; tail -2 $OUT/np1.log
timeout 150 bash scripts/pytest-ranks.sh 2 -q -rs -k rmsnorm python/tests/test_iris_ccl.py python/tests/test_iris_ranks.py \
  > $OUT/np2.log 2>&1; echo "np2 rmsnorm tests: rc=$? ${SECONDS}s"; grep -E "passed|failed" $OUT/np2.log | tail -2
echo "done ${SECONDS}s"
