"""Remote-store bandwidth, written as an Iris program: rank 0 writes into a peer's heap buffer.

    aperture launch -n 2 -- python examples/iris/store_bandwidth.py [--dtype fp32] [--sizes 1M,64M] [--compare]

Rank 0's kernel iris.store()s its source block into the peer's copy of a heap buffer; after
the last launch the peer checks every element. --compare also times the same kernel written
on aperture.triton (apt.store).
"""

import torch

from bandwidth import arguments, report, seconds_per_launch  # sets TRITON_INTERPRET without a GPU

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import aperture.iris as iris  # noqa: E402
import aperture.triton as apt  # noqa: E402


@triton.jit
def iris_store_kernel(buffer, source, n, cur_rank, peer, heap_bases, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    iris.store(buffer + offs, tl.load(source + offs, mask=mask), cur_rank, peer, heap_bases, mask=mask)


@triton.jit
def aperture_store_kernel(buffer, source, n, cur_rank, peer, peer_bases, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    apt.store(buffer + offs, tl.load(source + offs, mask=mask), cur_rank, peer, peer_bases, mask=mask)


def main():
    args = arguments(__doc__.splitlines()[0])
    shmem = iris.iris(args.heap_size)
    rank = shmem.get_rank()
    element = torch.empty((), dtype=args.dtype).element_size()
    largest = max(args.sizes) // element
    buffer = shmem.zeros(largest, dtype=args.dtype)
    values = ((torch.arange(largest) % 53) + 7) % 120
    source = values.to(args.dtype).to(shmem.get_device())
    shmem.barrier()
    if rank == 0:
        for nbytes in args.sizes:
            n = nbytes // element
            grid = (triton.cdiv(n, args.block),)
            if args.compare:
                t_ap = seconds_per_launch(lambda: aperture_store_kernel[grid](buffer, source, n, rank, args.peer,
                                                                              shmem.address_map.peer_bases,
                                                                              BLOCK=args.block),
                                          args.iters, buffer.device)
                report("aperture.triton", n * element, t_ap)
            t_iris = seconds_per_launch(lambda: iris_store_kernel[grid](buffer, source, n, rank, args.peer,
                                                                        shmem.get_heap_bases(), BLOCK=args.block),
                                        args.iters, buffer.device)
            report("iris.store", n * element, t_iris, t_ap if args.compare else None)
    shmem.barrier()  # rank 0's stores are complete (barrier synchronises its GPU first)
    if rank == args.peer and rank != 0:
        if not torch.equal(buffer.cpu(), values.to(args.dtype)):
            raise SystemExit(f"rank {rank}: what rank 0 stored is wrong")
        print(f"rank {rank}: every element rank 0 stored is right")


if __name__ == "__main__":
    main()
