#!/usr/bin/env bash
# Device call 1 of session 47 (one GPU, asked as nvidia-h200; fresh machine likely): the package
# installed; the GPU tests mended after run 57 (iris.backend, topology, kernel_artifacts; the
# gpu-marked ones required) at 1 rank and at 2 ranks sharing the GPU; on an H200 iris.ccl's host
# overhead alone on the GPU (issue 27's H200 row, as run 53 on the H100: 3 runs at 1 rank of 11
# rounds of 2000 calls, 2 at 2 ranks of 11 rounds of 100); then Iris's tests/context and
# tests/compile unmodified (scripts/iris-upstream.sh on the mini tree .deps/iris-extra) with the
# time left.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SECONDS=0; LIMIT=${LIMIT:-570}
bound() { local left=$(( LIMIT - SECONDS )); (( left < 20 )) && { echo 1; return; }; echo $(( $1 < left ? $1 : left )); }
model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$model"
python3 -c 'import aperture.iris.backend' 2>/dev/null || { timeout $(bound 200) env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
  python3 -m pip install --no-build-isolation --no-deps --no-index . > $OUT/install.log 2>&1; echo "pip install: rc=$? ${SECONDS}s"; }
logs=$OUT/logs; mkdir -p $logs
files="python/tests/test_iris_topology.py python/tests/test_iris_backend.py python/tests/test_iris_kernel_artifacts.py"
timeout $(bound 80) env APERTURE_TEST_REQUIRE=gpu bash scripts/pytest-ranks.sh 1 -rs -m gpu $files > $logs/np1-gpu.log 2>&1
echo "np1 -m gpu (required): rc=$? ${SECONDS}s"; tail -1 $logs/np1-gpu.log
timeout $(bound 80) bash scripts/pytest-ranks.sh 1 -rs $files > $logs/np1-all.log 2>&1
echo "np1 the files whole: rc=$? ${SECONDS}s"; tail -1 $logs/np1-all.log
timeout $(bound 80) bash scripts/pytest-ranks.sh 2 -rs $files > $logs/np2.log 2>&1
echo "np2 the files whole: rc=$? ${SECONDS}s"; grep -E "passed|failed" $logs/np2.log | tail -2
if [[ $model == *H200* ]]; then
  launcher=$(python3 -c 'import aperture; print(aperture.program)')
  d=$OUT/ccl-overhead; mkdir -p $d
  for np in 1 2; do
    runs=3 iters=2000; (( np == 2 )) && runs=2 iters=100
    for run in $(seq $runs); do
      t=$(bound 90); (( t > 1 )) || { echo "np$np run $run: no time left"; break; }
      f=$d/iris-ccl-overhead-np$np-run$run
      CUDA_VISIBLE_DEVICES=0 timeout $t "$launcher" launch -n $np --timeout $(( t - 5 )) -- python3 examples/iris/ccl_overhead.py \
        --iters $iters --rounds 11 --csv $f.csv > $f.txt 2>&1
      echo "np$np run $run: rc=$? ${SECONDS}s"; grep -E "largest" $f.txt | tail -1
    done
  done
  (cd $OUT && tar czf ccl-overhead.tgz ccl-overhead && rm -rf ccl-overhead)
fi
left=$(( LIMIT - SECONDS - 15 ))
if (( left > 60 )); then
  timeout $left env IRIS_SRC=.deps/iris-extra IRIS_ONLY='tests/(context|compile)/' IRIS_RANKS="1 2" \
    IRIS_UPSTREAM_LOGS=$logs/iris-upstream IRIS_UPSTREAM_TIMEOUT=$(( left - 10 )) bash scripts/iris-upstream.sh > $logs/iris-upstream.txt 2>&1
  echo "iris-upstream context+compile: rc=$? ${SECONDS}s"; tail -12 $logs/iris-upstream.txt
else echo "iris-upstream: no time left (${left}s)"; fi
(cd $OUT && tar czf logs.tgz logs && rm -rf logs)
echo "done ${SECONDS}s"
