"""The one-shot all-reduce kernel of examples/python: written once, run on any memory.

triton_all_reduce.py runs it on aperture tensors, torch_symmetric_memory_all_reduce.py on
torch symmetric memory. The kernel sees only a pointer valid on this rank and a table of peer
bases; it does not know which allocator made either.
"""

import os

import torch

if not torch.cuda.is_available():  # host memory: Triton's interpreter runs the kernel on the CPU
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import aperture.triton as apt  # noqa: E402


@triton.jit
def one_shot_all_reduce_kernel(inp, out, peer_bases, rank, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """out[i] = sum over every rank r of r's inp[i]. ``inp`` is symmetric (in the table's
    allocation, valid on ``rank``); ``out`` is any local tensor. Every rank's input must be
    complete before the launch (the caller's barrier)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for peer in range(WORLD):
        acc += apt.load(inp + offs, rank, peer, peer_bases, mask=mask).to(tl.float32)
    tl.store(out + offs, acc.to(out.dtype.element_ty), mask=mask)


def all_reduce(inp, out, peer_bases, rank, world, block=1024):
    n = inp.numel()
    one_shot_all_reduce_kernel[(triton.cdiv(n, block),)](inp, out, peer_bases, rank, n, WORLD=world, BLOCK=block)


def rank_values(rank, n, device):
    """What rank `rank` contributes: different per rank and per element, exact in float32."""
    i = torch.arange(n, device=device, dtype=torch.float32)
    return (i % 97) * (rank + 1) + rank


def expected_sum(world, n, device):
    return sum(rank_values(r, n, device) for r in range(world))
