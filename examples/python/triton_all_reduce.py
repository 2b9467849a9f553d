"""A Triton one-shot all-reduce on aperture tensors.

    aperture launch -n 2 -- python examples/python/triton_all_reduce.py [PROVIDER] [N]

Every rank allocates a symmetric tensor from PROVIDER (default: the default provider, a CUDA
one on a GPU machine, shm without a GPU, where Triton's interpreter runs the kernel), fills it
with its own values, and one kernel per rank reads every peer's copy through the allocation's
table (aperture.address_map(t).peer_bases) and sums. Each rank checks every element.
"""

import sys

import torch

from triton_one_shot import all_reduce, expected_sum, rank_values  # sets TRITON_INTERPRET on a CPU-only machine

import aperture


def main():
    provider_name = sys.argv[1] if len(sys.argv) > 1 else "default"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 20
    team = aperture.Team.from_env()
    if torch.cuda.is_available():
        torch.cuda.set_device(team.local_rank % torch.cuda.device_count())
    provider = aperture.make_provider(provider_name, team)
    inp = provider.zeros((n,), torch.float32)  # collective
    inp.copy_(rank_values(team.rank, n, inp.device))
    out = torch.empty_like(inp)  # an ordinary tensor: only the input needs to be symmetric
    sync(inp)
    team.barrier()  # every rank's input is written
    all_reduce(inp, out, aperture.address_map(inp).peer_bases, team.rank, team.size)
    sync(inp)
    team.barrier()  # nobody frees its input while a peer still reads it
    wrong = (out != expected_sum(team.size, n, out.device)).nonzero()
    provider.free(inp)  # collective
    if wrong.numel():
        i = int(wrong[0])
        raise SystemExit(f"rank {team.rank}: {wrong.numel()} of {n} sums wrong; element {i} is {out[i].item()}, "
                         f"expected {expected_sum(team.size, n, out.device)[i].item()}")
    print(f"rank {team.rank}: one-shot all-reduce of {n} floats over {team.size} ranks on {provider.name}: "
          f"every element right")


def sync(t):
    if t.is_cuda:
        torch.cuda.synchronize(t.device)


if __name__ == "__main__":
    main()
