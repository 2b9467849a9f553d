#!/usr/bin/env bash
# One-off device call (session 29): build + sanitize; then why node 0's NCCL rank does not finish
# its teardown after node 1 is killed: the kill test with a 40 s grace, rank 0's threads dumped
# with cuda-gdb 3 s after the kill (np2), and np4 with the same grace (timings only).
set -uo pipefail
root=$PWD
GPU_CHECK_BUDGET_S=${SAN_BUDGET:-330} bash scripts/gpu-check.sh sanitize > $OUT/sanitize-console.txt 2>&1
echo "sanitize: rc=$? ${SECONDS}s"; tail -4 $OUT/sanitize-console.txt
b=$root/build-gpu
export CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 APERTURE_GPU_HEAP_SIZE=256M \
  APERTURE_GPU_PROVIDER=cuda-ipc APERTURE_COLLECTIVES_BETWEEN_NODES=nccl APERTURE_TEST_EXPECT_BETWEEN_NODES=nccl \
  NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=WARN APERTURE_TEST_KILL_GRACE=40
watch_and_dump() {  # $1: output file
  local n=0 seen=0
  for _ in $(seq 400); do
    n=$(pgrep -x gpu_collective_ | wc -l)
    (( n >= 2 )) && seen=1
    (( seen && n == 1 )) && break
    sleep 0.1
  done
  sleep 3
  for p in $(pgrep -x gpu_collective_); do
    echo "=== pid $p, 3 s after the kill: threads"; ls /proc/$p/task | while read t; do
      echo "$t $(cat /proc/$p/task/$t/comm) $(cat /proc/$p/task/$t/wchan 2>/dev/null) $(awk '{print $3}' /proc/$p/task/$t/stat)"; done
    timeout 90 cuda-gdb -p $p -batch -ex "info threads" -ex "thread apply all bt 25" 2>&1 | grep -v "^\[New\|^warning:" | head -400
  done > "$1" 2>&1
}
watch_and_dump $OUT/kill-np2-stacks.txt & w=$!
timeout 150 bash tests/multinode/collective_kill_test.sh $b/aperture/tools/aperture $b/gpu_collective_fault_test 2 > $OUT/kill-np2.txt 2>&1
echo "kill np2 (grace 40, dumped): rc=$? ${SECONDS}s"; head -3 $OUT/kill-np2.txt; wait $w
APERTURE_TEST_NODE1_STOPS=1 timeout 100 bash tests/multinode/collective_kill_test.sh $b/aperture/tools/aperture $b/gpu_collective_fault_test 4 60 55 > $OUT/kill-np4.txt 2>&1
echo "kill np4 (grace 40): rc=$? ${SECONDS}s"; head -3 $OUT/kill-np4.txt
