#!/usr/bin/env bash
# Device call of session 51 (one GPU): pip install; all_reduce_rmsnorm's host time A/B (this tree,
# fe15023's module, 0d481ea's) at 1 and 32 rows; the rmsnorm and launch tests at 1 rank,
# the rmsnorm tests at 2; iris.ops (the fast reduce-scatter) at 1 rank and -k fast at 2; Iris's
# test_optional_sdma (two stored versions) at 1 rank through python -m aperture.iris; test_iris_host
# and test_iris_ccl at 1 rank, test_iris_ccl at 2.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0; LIMIT=${LIMIT:-560}
model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$model"
bound() { local left=$(( LIMIT - SECONDS )); (( left < 30 )) && { echo 1; return; }; echo $(( $1 < left ? $1 : left )); }
timeout $(bound 220) env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1; echo "pip install: rc=$? ${SECONDS}s"
ap=$(python3 -c 'import aperture; print(aperture.program)')
for rows in 1 32; do
  timeout $(bound 100) $ap launch -n 1 --timeout 95 -- python3 .deps/ab_launch.py $rows .deps/fused_fe15023.py \
    .deps/fused_before49.py .deps/fused_claunch.py > $OUT/ab-launch-$rows.txt 2>&1; echo "A/B $rows rows: rc=$? ${SECONDS}s"; tail -7 $OUT/ab-launch-$rows.txt
done
timeout $(bound 60) $ap launch -n 1 --timeout 55 -- python3 .deps/breakdown.py 32 > $OUT/breakdown-32.txt 2>&1
echo "breakdown: rc=$? ${SECONDS}s"; tail -19 $OUT/breakdown-32.txt
timeout $(bound 100) bash scripts/pytest-ranks.sh 1 -q -rs -k "rmsnorm or launch" python/tests/test_iris_ranks.py \
  > $OUT/np1-rmsnorm.log 2>&1; echo "np1 rmsnorm: rc=$? ${SECONDS}s"; tail -2 $OUT/np1-rmsnorm.log
timeout $(bound 120) bash scripts/pytest-ranks.sh 2 -q -rs -k rmsnorm python/tests/test_iris_ranks.py \
  > $OUT/np2-rmsnorm.log 2>&1; echo "np2 rmsnorm: rc=$? ${SECONDS}s"; grep -E "passed|failed" $OUT/np2-rmsnorm.log | tail -2
timeout $(bound 150) bash scripts/pytest-ranks.sh 1 -q -rs python/tests/test_iris_ops.py python/tests/test_iris_ops_extras.py \
  > $OUT/np1-ops.log 2>&1; echo "np1 ops: rc=$? ${SECONDS}s"; tail -2 $OUT/np1-ops.log
timeout $(bound 120) bash scripts/pytest-ranks.sh 2 -q -rs -k fast python/tests/test_iris_ops.py python/tests/test_iris_ops_extras.py \
  > $OUT/np2-ops-fast.log 2>&1; echo "np2 ops fast: rc=$? ${SECONDS}s"; grep -E "passed|failed" $OUT/np2-ops-fast.log | tail -2
timeout $(bound 90) $ap launch -n 1 --timeout 85 -- python3 -m aperture.iris -m pytest -q -rs -p no:cacheprovider \
  .deps/iris-extra/tests/unittests/ > $OUT/np1-optional-sdma.log 2>&1; echo "optional_sdma np1: rc=$? ${SECONDS}s"; tail -2 $OUT/np1-optional-sdma.log
timeout $(bound 120) bash scripts/pytest-ranks.sh 1 -q -rs python/tests/test_iris_host.py python/tests/test_iris_ccl.py \
  > $OUT/np1-host-ccl.log 2>&1; echo "np1 host+ccl: rc=$? ${SECONDS}s"; tail -2 $OUT/np1-host-ccl.log
timeout $(bound 120) bash scripts/pytest-ranks.sh 2 -q -rs python/tests/test_iris_ccl.py \
  > $OUT/np2-ccl.log 2>&1; echo "np2 ccl: rc=$? ${SECONDS}s"; grep -E "passed|failed" $OUT/np2-ccl.log | tail -2
echo "done ${SECONDS}s"
