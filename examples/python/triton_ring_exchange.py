"""A Triton ring exchange on aperture tensors: put, signal, wait, in one kernel.

    aperture launch -n 4 -- python examples/python/triton_ring_exchange.py [PROVIDER]

Each lap, every rank's kernel puts its block into the next rank's inbox, signals that rank's
flag with the lap number, waits until its own flag shows the lap, and copies what the previous
rank put into it out to a local tensor. The data and the flag are two allocations, so the
kernel takes two tables. Flags only grow (lap 1, 2, ...), so one flag serves every lap. On a
machine without a GPU the default provider is shm and Triton's interpreter runs the kernel.
"""

import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import aperture  # noqa: E402
import aperture.triton as apt  # noqa: E402

N = 4096
BLOCK = 1024
LAPS = 3


@triton.jit
def ring_lap_kernel(inbox, inbox_bases, mine, received, flag, flag_bases, rank, world, lap,
                    N: tl.constexpr, BLOCK: tl.constexpr):
    # One program moves the whole block, so its signal follows all of its stores.
    next_rank = (rank + 1) % world
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        apt.put(inbox + offs, mine + offs, rank, next_rank, inbox_bases)
    apt.signal(flag, lap, rank, next_rank, flag_bases)
    apt.wait_until_ge(flag, lap)  # the previous rank's put into my inbox is complete and visible
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        tl.store(received + offs, tl.load(inbox + offs))


def values(rank, lap, device):
    return torch.arange(N, device=device, dtype=torch.int64) * 1000 + rank * 10 + lap


def main():
    provider_name = sys.argv[1] if len(sys.argv) > 1 else "default"
    team = aperture.Team.from_env()
    if torch.cuda.is_available():
        torch.cuda.set_device(team.local_rank % torch.cuda.device_count())
    provider = aperture.make_provider(provider_name, team)
    inbox = provider.zeros((N,), torch.int64)  # collective, like every allocation
    flag = provider.zeros((1,), torch.uint64)
    inbox_bases = aperture.address_map(inbox).peer_bases
    flag_bases = aperture.address_map(flag).peer_bases
    received = torch.zeros(N, dtype=torch.int64, device=inbox.device)
    previous = (team.rank - 1) % team.size
    for lap in range(1, LAPS + 1):
        mine = values(team.rank, lap, inbox.device)
        ring_lap_kernel[(1,)](inbox, inbox_bases, mine, received, flag, flag_bases, team.rank, team.size, lap,
                              N=N, BLOCK=BLOCK)
        if inbox.is_cuda:
            torch.cuda.synchronize()
        if not torch.equal(received, values(previous, lap, inbox.device)):
            raise SystemExit(f"rank {team.rank}, lap {lap}: the block from rank {previous} is wrong")
        team.barrier()  # the next lap overwrites the inboxes: everyone has read this one
    provider.free(flag)
    provider.free(inbox)
    print(f"rank {team.rank}: {LAPS} laps of the ring over {team.size} ranks on {provider.name}: every element right")


if __name__ == "__main__":
    main()
