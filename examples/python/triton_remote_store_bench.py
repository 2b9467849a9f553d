"""Remote-store bandwidth of one Triton kernel through aperture.triton against the same kernel
on raw torch symmetric-memory buffer_ptrs (the issue's target: at most 1% slower from 1 MiB).

    aperture launch -n 2 -- python examples/python/triton_remote_store_bench.py [ITERS]

Both kernels store the same block into rank 1's copy of the same torch symmetric-memory buffer,
so the only difference is the translation: aperture.triton.store(ptr, v, rank, peer,
peer_bases) against tl.store(buffer_ptrs[peer] + offs) with the 16-byte alignment promised by
hand (tl.multiple_of), the best a raw kernel can do. Rank 0 stores, rank 1 waits. Prints one
line per size: GB/s of each and the ratio. Needs 2 GPUs (or 2 ranks on one).
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

import aperture
import aperture.triton as apt

BLOCK = 4096


@triton.jit
def aperture_store_kernel(buf, src, peer_bases, rank, peer, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    apt.store(buf + offs, tl.load(src + offs, mask=mask), rank, peer, peer_bases, mask=mask)


@triton.jit
def raw_store_kernel(buffer_ptrs, src, peer, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    dst = tl.multiple_of(tl.load(buffer_ptrs + peer).to(tl.pointer_type(tl.float32)), 16)
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def timed(launch, iters):
    launch()  # compile and warm up
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        launch()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / 1e3 / iters


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != 2:
        raise SystemExit("run with 2 ranks")
    max_bytes = 256 << 20
    buf = symm_mem.empty(max_bytes // 4, dtype=torch.float32, device="cuda")
    handle = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
    peer_bases = aperture.from_torch_symmetric(buf).peer_bases
    buffer_ptrs = torch.tensor(handle.buffer_ptrs, dtype=torch.int64, device="cuda")
    src = torch.randn(max_bytes // 4, device="cuda")
    peer = 1 - rank
    if rank == 0:
        print(f"{'bytes':>12} {'aperture GB/s':>14} {'raw GB/s':>10} {'aperture/raw':>13}")
    for nbytes in [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]:
        n = nbytes // 4
        grid = (triton.cdiv(n, BLOCK),)
        dist.barrier()
        if rank == 0:
            t_ap = timed(lambda: aperture_store_kernel[grid](buf, src, peer_bases, rank, peer, n, BLOCK=BLOCK), iters)
            t_raw = timed(lambda: raw_store_kernel[grid](buffer_ptrs, src, peer, n, BLOCK=BLOCK), iters)
            print(f"{nbytes:>12} {nbytes / t_ap / 1e9:>14.1f} {nbytes / t_raw / 1e9:>10.1f} {t_raw / t_ap:>13.3f}")
        dist.barrier()
    torch.cuda.synchronize()
    dist.barrier()
    stored = src.clone()  # rank 0's src, the last thing both kernels stored into rank 1
    dist.broadcast(stored, 0)
    if rank == 1:
        print(f"rank 1: the stored data is {'right' if torch.equal(buf, stored) else 'WRONG'}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
