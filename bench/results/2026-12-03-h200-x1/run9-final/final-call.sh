#!/usr/bin/env bash
# One device call (TOTAL_S): build; the one-GPU benchmarks alone; then proxy, sanitize and Iris's
# own tests side by side in what is left. Logs tarred into $OUT after each phase; a summary last.
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL_S=${TOTAL_S:-425}
L=/tmp/g9; mkdir -p $L; B=$L/bench; mkdir -p $B
snap() { tar czf $OUT/logs.tgz -C /tmp g9 2>/dev/null; }
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . > $L/pip.txt 2>&1 &
pip_job=$!
PYTHON_PREBUILD=0 LOG_DIR=$L/build GPU_CHECK_BUDGET_S=230 bash scripts/gpu-check.sh build > $L/build.txt 2>&1
echo "build: rc=$? ${SECONDS}s"
wait $pip_job; echo "pip: rc=$? ${SECONDS}s"; snap
export CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
S=$(python3 -c 'import aperture,os;print(os.path.dirname(aperture.__file__))'); A=$S/bin/aperture
timeout 45 $A launch -n 1 --timeout 42 -- python3 examples/iris/ccl_overhead.py --iters 2000 \
  --csv $B/iris-ccl-overhead-np1.csv > $B/iris-ccl-overhead-np1.txt 2>&1; echo "ccl np1 rc=$? ${SECONDS}s"
timeout 50 $A launch -n 2 --timeout 47 -- python3 examples/iris/ccl_overhead.py --iters 100 \
  --csv $B/iris-ccl-overhead-np2.csv > $B/iris-ccl-overhead-np2.txt 2>&1; echo "ccl np2 rc=$? ${SECONDS}s"; snap
timeout 75 env APERTURE_HEAP_SIZE=256M APERTURE_TIMEOUT=70 $A launch --mpi --nodes 2 -n 2 --timeout 72 -- \
  python3 bench/python/triton_proxy.py --provider cuda-ipc --rounds 5 > $B/triton-proxy.txt 2>&1; echo "triton-proxy rc=$? ${SECONDS}s"; snap
for v in before after; do rm -rf /tmp/$v && mkdir /tmp/$v && cp -r python/aperture /tmp/$v/ && ln -s $S/_core*.so $S/bin $S/lib /tmp/$v/aperture/; done
cp .deps/before_fused.py /tmp/before/aperture/iris/ccl/_fused.py
for v in before after; do PYTHONPATH=/tmp/$v timeout 30 $A launch -n 1 --timeout 28 -- python3 bench/python/iris_rmsnorm.py \
  --iters 100 --rows 1,8,128 > $B/iris-rmsnorm-np1-$v.txt 2>&1; echo "rmsnorm $v rc=$? ${SECONDS}s"; done; snap
left=$((TOTAL_S - SECONDS - 15))
echo "side by side with ${left}s"
(NO_BUILD=1 LOG_DIR=$L/proxy GPU_CHECK_BUDGET_S=$left bash scripts/gpu-check.sh proxy > $L/proxy.txt 2>&1) &
(NO_BUILD=1 LOG_DIR=$L/sanitize GPU_CHECK_BUDGET_S=$left bash scripts/gpu-check.sh sanitize > $L/sanitize.txt 2>&1) &
(IRIS_UPSTREAM_LOGS=$L/iris IRIS_RANKS="1 2" IRIS_UPSTREAM_TIMEOUT=$((left - 20)) timeout $((left - 5)) \
   bash scripts/iris-upstream.sh .deps/iris > $L/iris.txt 2>&1; echo "iris-upstream rc=$?" >> $L/iris.txt) &
wait
echo "side by side done: ${SECONDS}s"; snap
for f in proxy sanitize; do echo "== $f"; grep -A12 "=== gpu-check summary" $L/$f.txt | tail -n +2 | cut -c1-400; done
echo "== iris"; grep -E "np[12] |passed,|rc=" $L/iris.txt | cut -c1-160
for f in $B/*.txt; do echo "== $(basename $f)"; tail -9 $f | cut -c1-220; done
