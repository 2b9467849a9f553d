"""Remote-load bandwidth, written as an Iris program: rank 0 reads a peer's heap buffer.

    aperture launch -n 2 -- python examples/iris/load_bandwidth.py [--dtype fp32] [--sizes 1M,64M] [--compare]

Every rank fills its buffer with values of its own; rank 0's kernel iris.load()s the peer's
copy into a local result, and checks every element of the last result. --compare also times
the same kernel written on aperture.triton (apt.load).
"""

import torch

from bandwidth import arguments, report, seconds_per_launch  # sets TRITON_INTERPRET without a GPU

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import aperture.iris as iris  # noqa: E402
import aperture.triton as apt  # noqa: E402


@triton.jit
def iris_load_kernel(buffer, result, n, cur_rank, peer, heap_bases, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(result + offs, iris.load(buffer + offs, cur_rank, peer, heap_bases, mask=mask), mask=mask)


@triton.jit
def aperture_load_kernel(buffer, result, n, cur_rank, peer, peer_bases, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(result + offs, apt.load(buffer + offs, cur_rank, peer, peer_bases, mask=mask), mask=mask)


def main():
    args = arguments(__doc__.splitlines()[0])
    shmem = iris.iris(args.heap_size)
    rank = shmem.get_rank()
    element = torch.empty((), dtype=args.dtype).element_size()
    largest = max(args.sizes) // element
    buffer = shmem.zeros(largest, dtype=args.dtype)
    buffer.copy_((torch.arange(largest) % 61 + 3 * rank) % 120)
    result = torch.zeros(largest, dtype=args.dtype, device=shmem.get_device())
    shmem.barrier()
    if rank == 0:
        for nbytes in args.sizes:
            n = nbytes // element
            grid = (triton.cdiv(n, args.block),)
            t_iris = seconds_per_launch(lambda: iris_load_kernel[grid](buffer, result, n, rank, args.peer,
                                                                       shmem.get_heap_bases(), BLOCK=args.block),
                                        args.iters, buffer.device)
            if args.compare:
                t_ap = seconds_per_launch(lambda: aperture_load_kernel[grid](buffer, result, n, rank, args.peer,
                                                                             shmem.address_map.peer_bases,
                                                                             BLOCK=args.block),
                                          args.iters, buffer.device)
                report("aperture.triton", n * element, t_ap)
            report("iris.load", n * element, t_iris, t_ap if args.compare else None)
        expected = (torch.arange(largest) % 61 + 3 * args.peer) % 120
        n = max(args.sizes) // element
        if not torch.equal(result[:n].cpu(), expected[:n].to(args.dtype)):
            raise SystemExit(f"rank 0: what it loaded from rank {args.peer} is wrong")
        print(f"rank 0: every element loaded from rank {args.peer} is right")
    shmem.barrier()


if __name__ == "__main__":
    main()
