#!/usr/bin/env bash
# Device call 1 of session 46 (one GPU, asked as nvidia-h200). On an H200: iris.ccl's host overhead
# alone on the GPU (issue 27's H200 row: three runs at 1 rank of 11 rounds of 2000 calls, two at
# 2 ranks sharing it of 11 rounds of 100), as session 45's run 53 did on an H100. On any other GPU:
# scripts/gpu-check.sh core, whole (its new form has not yet run whole).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SECONDS=0; LIMIT=${LIMIT:-560}
model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$model"
if [[ $model != *H200* ]]; then
  GPU_CHECK_BUDGET_S=${CORE_BUDGET:-560} bash scripts/gpu-check.sh core > $OUT/gpu-check-core.txt 2>&1
  echo "gpu-check core: rc=$? ${SECONDS}s"
  cat $OUT/gpu-check/summary.txt
  exit 0
fi
bound() { local left=$(( LIMIT - SECONDS )); (( left < 30 )) && { echo 1; return; }; echo $(( $1 < left ? $1 : left )); }
python3 -c 'import aperture.iris' 2>/dev/null || { timeout $(bound 200) env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
  python3 -m pip install --no-build-isolation --no-deps --no-index . > $OUT/install.log 2>&1; echo "pip install: rc=$? ${SECONDS}s"; }
launcher=$(python3 -c 'import aperture; print(aperture.program)')
d=$OUT/ccl-overhead; mkdir -p $d
for np in 1 2; do
  runs=3 iters=2000; (( np == 2 )) && runs=2 iters=100
  for run in $(seq $runs); do
    t=$(bound 120); (( t > 1 )) || { echo "np$np run $run: no time left"; break; }
    f=$d/iris-ccl-overhead-np$np-run$run
    CUDA_VISIBLE_DEVICES=0 timeout $t "$launcher" launch -n $np --timeout $(( t - 5 )) -- python3 examples/iris/ccl_overhead.py \
      --iters $iters --rounds 11 --csv $f.csv > $f.txt 2>&1
    echo "np$np run $run: rc=$? ${SECONDS}s"; grep -E "largest" $f.txt | tail -1
  done
done
