#!/usr/bin/env bash
# Device call of session 47, for issue 27's H200 row only: on an H200, iris.ccl's host overhead
# alone on the GPU (3 runs at 1 rank of 11 rounds of 2000 calls, 2 at 2 ranks sharing it of 11
# rounds of 100), as run 53 did on an H100. On any other GPU it stops at once.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0; LIMIT=${LIMIT:-560}
model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$model"
[[ $model == *H200* ]] || { echo "not an H200: nothing run"; exit 0; }
bound() { local left=$(( LIMIT - SECONDS )); (( left < 30 )) && { echo 1; return; }; echo $(( $1 < left ? $1 : left )); }
timeout $(bound 200) env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1; echo "pip install: rc=$? ${SECONDS}s"
launcher=$(python3 -c 'import aperture; print(aperture.program)')
for np in 1 2; do
  runs=3 iters=2000; (( np == 2 )) && runs=2 iters=100
  for run in $(seq $runs); do
    t=$(bound 90); (( t > 1 )) || { echo "np$np run $run: no time left"; break; }
    f=$OUT/iris-ccl-overhead-np$np-run$run
    CUDA_VISIBLE_DEVICES=0 timeout $t "$launcher" launch -n $np --timeout $(( t - 5 )) -- python3 examples/iris/ccl_overhead.py \
      --iters $iters --rounds 11 --csv $f.csv > $f.txt 2>&1
    echo "np$np run $run: rc=$? ${SECONDS}s"; grep -E "largest" $f.txt | tail -1
  done
done
(cd $OUT && tar czf ccl-overhead.tgz iris-ccl-overhead-* && rm -f iris-ccl-overhead-*)
echo "done ${SECONDS}s"
