"""The same Triton one-shot all-reduce kernel, on torch symmetric memory.

    aperture launch -n 2 -- python examples/python/torch_symmetric_memory_all_reduce.py [N]
    torchrun --nproc-per-node 2 examples/python/torch_symmetric_memory_all_reduce.py [N]

The tensor comes from torch.distributed._symmetric_memory.empty and its rendezvous;
aperture.from_torch_symmetric(t) imports it without a copy: its peer_bases is the rendezvous
handle's buffer_ptrs. The kernel is triton_one_shot.one_shot_all_reduce_kernel, unchanged from
triton_all_reduce.py. Needs CUDA GPUs (torch symmetric memory is CUDA memory).
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

from triton_one_shot import all_reduce, expected_sum, rank_values

import aperture


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
    if not torch.cuda.is_available():
        raise SystemExit("torch symmetric memory needs CUDA GPUs; this machine has none")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank % torch.cuda.device_count())
    dist.init_process_group("nccl")  # aperture launch exports RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    inp = symm_mem.empty(n, dtype=torch.float32, device="cuda")
    symm_mem.rendezvous(inp, dist.group.WORLD.group_name)  # collective
    amap = aperture.from_torch_symmetric(inp)
    inp.copy_(rank_values(rank, n, inp.device))
    out = torch.empty_like(inp)
    torch.cuda.synchronize()
    dist.barrier()  # every rank's input is written
    all_reduce(inp, out, amap.peer_bases, rank, world)
    torch.cuda.synchronize()
    dist.barrier()  # nobody frees its input while a peer still reads it
    wrong = int((out != expected_sum(world, n, out.device)).sum())
    dist.destroy_process_group()
    if wrong:
        raise SystemExit(f"rank {rank}: {wrong} of {n} sums wrong")
    print(f"rank {rank}: the same one-shot all-reduce kernel on torch symmetric memory ({n} floats, {world} ranks): "
          f"every element right")


if __name__ == "__main__":
    main()
