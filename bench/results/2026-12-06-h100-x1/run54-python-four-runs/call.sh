#!/usr/bin/env bash
# Device call 4 of session 45 (one GPU, asked as nvidia-h200): on an H200, iris.ccl's host
# overhead alone on the GPU (3 runs at 1 rank, 2 at 2 ranks sharing it: the table's H200 row); on
# an H100, the python part of scripts/gpu-check.sh in its four-run form (8562dd5), bounded so that
# the one-rank runs' times come back even if the steps after them are cut.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SECONDS=0; LIMIT=${LIMIT:-490}
bound() { local left=$(( LIMIT - SECONDS )); (( left < 30 )) && { echo 1; return; }; echo $(( $1 < left ? $1 : left )); }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu"
if [[ $gpu != *H200* ]]; then
  NO_BUILD=1 GPU_CHECK_BUDGET_S=$(( LIMIT - SECONDS - 15 )) bash scripts/gpu-check.sh python > $OUT/gpu-check-python.txt 2>&1
  echo "gpu-check python: rc=$? ${SECONDS}s"; cat $OUT/gpu-check/summary.txt
  for f in $OUT/gpu-check/python.np1*.times; do echo "== ${f##*/}: $(wc -l < $f) tests, $(awk '{s+=$1} END {print s}' $f) s"; done
  exit 0
fi
timeout $(bound 200) env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1; echo "pip install: rc=$? ${SECONDS}s"
launcher=$(python3 -c 'import aperture; print(aperture.program)')
d=/tmp/ccl-overhead; mkdir -p $d
trap 'tar -C /tmp -czf $OUT/ccl-overhead.tgz ccl-overhead' EXIT
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
