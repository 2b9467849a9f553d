#!/usr/bin/env bash
# Device call of session 48. On an H200 first: iris.ccl's host overhead (issue 27's H200 row, as
# run 63's call-h200-only.sh). On any GPU: all_reduce_rmsnorm's host time A/B (operand messages
# made only on failure, against the module before), the rmsnorm tests at 1 and 2 ranks, and
# test_iris_ccl's new simulation-mode test.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0; LIMIT=${LIMIT:-570}
model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$model"
bound() { local left=$(( LIMIT - SECONDS )); (( left < 30 )) && { echo 1; return; }; echo $(( $1 < left ? $1 : left )); }
timeout $(bound 200) env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1; echo "pip install: rc=$? ${SECONDS}s"
ap=$(python3 -c 'import aperture; print(aperture.program)')
for rows in 1 32; do
  timeout $(bound 90) $ap launch -n 1 --timeout 85 -- python3 .deps/ab_checks.py $rows .deps/fused_before.py \
    > $OUT/ab-checks-$rows.txt 2>&1; echo "A/B $rows rows: rc=$? ${SECONDS}s"; tail -5 $OUT/ab-checks-$rows.txt
done
timeout $(bound 100) bash scripts/pytest-ranks.sh 1 -q -rs -k "rmsnorm or simulation_mode" python/tests/test_iris_ccl.py \
  python/tests/test_iris_ranks.py > $OUT/np1.log 2>&1; echo "np1 tests: rc=$? ${SECONDS}s"; tail -2 $OUT/np1.log
timeout $(bound 120) bash scripts/pytest-ranks.sh 2 -q -rs -k rmsnorm python/tests/test_iris_ranks.py \
  > $OUT/np2.log 2>&1; echo "np2 tests: rc=$? ${SECONDS}s"; grep -E "passed|failed" $OUT/np2.log | tail -2
if [[ $model == *H200* ]]; then
  for np in 1 2; do
    runs=3 iters=2000; (( np == 2 )) && runs=2 iters=100
    for run in $(seq $runs); do
      t=$(bound 80); (( t > 1 )) || { echo "np$np run $run: no time left"; break; }
      f=$OUT/iris-ccl-overhead-np$np-run$run
      CUDA_VISIBLE_DEVICES=0 timeout $t "$ap" launch -n $np --timeout $(( t - 5 )) -- python3 examples/iris/ccl_overhead.py \
        --iters $iters --rounds 11 --csv $f.csv > $f.txt 2>&1
      echo "np$np run $run: rc=$? ${SECONDS}s"; grep -E "largest" $f.txt | tail -1
    done
  done
  (cd $OUT && tar czf ccl-overhead.tgz iris-ccl-overhead-* && rm -f iris-ccl-overhead-*)
fi
echo "done ${SECONDS}s"
