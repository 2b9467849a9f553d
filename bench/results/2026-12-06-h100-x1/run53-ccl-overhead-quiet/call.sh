#!/usr/bin/env bash
# Device call 3 of session 45 (one GPU, after `rest` on the same machine: the package is installed):
# iris.ccl's host overhead alone on the GPU, three runs at 1 rank (11 rounds of 2000 calls) and two
# at 2 ranks sharing it (11 rounds of 100), as gpu-compare runs it but with nothing beside it.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SECONDS=0; LIMIT=${LIMIT:-560}
bound() { local left=$(( LIMIT - SECONDS )); (( left < 30 )) && { echo 1; return; }; echo $(( $1 < left ? $1 : left )); }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
python3 -c 'import aperture.iris' 2>/dev/null || { timeout $(bound 170) env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
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
