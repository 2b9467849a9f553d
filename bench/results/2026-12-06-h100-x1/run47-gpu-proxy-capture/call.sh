#!/usr/bin/env bash
# Device call 1 of session 44 (one GPU): (1) scripts/gpu-check.sh proxy: the build, and the
# gpu-proxy label, which now holds collectives_nodes_test's CUDA graph capture checks (NCCL path
# replays, MPI path refusals); the Python package builds beside it; (2) on an H200 only, iris.ccl's
# host overhead three times at 1 rank (the table reads H200 runs). Bounded by 575 s.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SECONDS=0
L=/tmp/logs; mkdir -p $L
trap 'tar -C /tmp -czf $OUT/logs.tar.gz logs 2>/dev/null' EXIT
LIMIT=${LIMIT:-575}
bound() { local left=$(( LIMIT - SECONDS )); (( left < 30 )) && { echo 1; return; }; echo $(( $1 < left ? $1 : left )); }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu"
GPU_CHECK_BUDGET_S=${PROXY_BUDGET:-330} bash scripts/gpu-check.sh proxy > $L/gpu-check.txt 2>&1
echo "gpu-check proxy: rc=$? ${SECONDS}s"; cat $OUT/gpu-check/summary.txt
grep -E "capture|graph" $OUT/gpu-check/proxy.log | head -20
python3 -c 'import aperture.iris' 2>/dev/null || { timeout $(bound 170) env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
  python3 -m pip install --no-build-isolation --no-deps --no-index . > $L/install.log 2>&1; echo "pip install: rc=$? ${SECONDS}s"; }
[[ $gpu == *H200* ]] || { echo "not an H200: no overhead runs"; exit 0; }
launcher=$(python3 -c 'import aperture; print(aperture.program)')
mkdir -p $OUT/ccl-overhead
for run in 1 2 3; do
  t=$(bound 45); (( t > 1 )) || { echo "ccl overhead $run: no time left"; break; }
  f=$OUT/ccl-overhead/iris-ccl-overhead-np1-run$run
  CUDA_VISIBLE_DEVICES=0 timeout $t "$launcher" launch -n 1 --timeout $(( t - 5 )) -- python3 examples/iris/ccl_overhead.py \
    --iters 2000 --rounds 11 --csv $f.csv > $f.txt 2>&1
  echo "ccl overhead np1 run $run: rc=$? ${SECONDS}s"; grep -E "broadcast +1048576|largest" $f.txt | tail -2
done
