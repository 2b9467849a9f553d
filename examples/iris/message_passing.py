"""Message passing between two ranks, written as an Iris program (only the import differs).

    aperture launch -n 2 -- python examples/iris/message_passing.py [--dtype fp32] [--size 65536] [--block 512]

Rank 0 (the producer) puts its buffer into rank 1's destination block by block, and after each
block raises that block's flag in rank 1's heap with a release exchange. Rank 1 (the consumer)
waits on each of its flags with an acquire compare-and-swap (which also resets the flag),
then doubles the block in place. Rank 1 checks every element at the end.
"""

import argparse
import os

import torch

if not torch.cuda.is_available():  # a CPU-only machine: shm heap, Triton's interpreter
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import aperture.iris as iris  # noqa: E402  (an Iris program says: import iris)

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "int8": torch.int8}


@triton.jit
def producer_kernel(source, destination, flags, n, producer: tl.constexpr, consumer: tl.constexpr,
                    BLOCK: tl.constexpr, heap_bases):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    iris.put(source + offs, destination + offs, producer, consumer, heap_bases, mask=mask)
    tl.debug_barrier()  # every thread's part of the block is written before the flag goes up
    iris.atomic_xchg(flags + pid, 1, producer, consumer, heap_bases, sem="release", scope="sys")


@triton.jit
def consumer_kernel(buffer, flags, n, consumer: tl.constexpr, BLOCK: tl.constexpr, heap_bases):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    seen = iris.atomic_cas(flags + pid, 1, 0, consumer, consumer, heap_bases, sem="acquire", scope="sys")
    while seen != 1:
        seen = iris.atomic_cas(flags + pid, 1, 0, consumer, consumer, heap_bases, sem="acquire", scope="sys")
    values = tl.load(buffer + offs, mask=mask)
    tl.store(buffer + offs, values * 2, mask=mask)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
    parser.add_argument("--size", type=int, default=1 << 16, help="elements")
    parser.add_argument("--block", type=int, default=512)
    parser.add_argument("--heap-size", type=int, default=1 << 28)
    args = parser.parse_args()

    shmem = iris.iris(args.heap_size)
    rank, world = shmem.get_rank(), shmem.get_num_ranks()
    if world != 2:
        raise SystemExit("message passing needs exactly 2 ranks")
    dtype = DTYPES[args.dtype]
    # Values that survive doubling in every dtype: small integers.
    source = shmem.zeros(args.size, dtype=dtype)
    source.copy_(torch.arange(args.size) % 50)
    destination = shmem.full((args.size,), -1, dtype=dtype)
    blocks = triton.cdiv(args.size, args.block)
    flags = shmem.zeros(blocks, dtype=torch.int32)
    shmem.barrier()
    if rank == 0:
        producer_kernel[(blocks,)](source, destination, flags, args.size, 0, 1, args.block, shmem.get_heap_bases())
    else:
        consumer_kernel[(blocks,)](destination, flags, args.size, 1, args.block, shmem.get_heap_bases())
    shmem.barrier()
    if rank == 1:
        expected = source * 2  # rank 0's source holds the same values as this rank's
        wrong = int((destination != expected).sum())
        if wrong:
            raise SystemExit(f"rank 1: {wrong} of {args.size} elements wrong")
        print(f"rank 1: received {args.size} x {args.dtype} in {blocks} blocks from rank 0: every element right")


if __name__ == "__main__":
    main()
