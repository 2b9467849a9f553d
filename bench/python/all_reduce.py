"""Eager all_reduce from Python: aperture's Communicator against torch.distributed.all_reduce
(NCCL) and torch symmetric memory's one-shot all-reduce, 4 KiB to 256 KiB of bfloat16 per rank.

    aperture launch -n 2 -- python bench/python/all_reduce.py [--provider cuda-ipc] [--iters 200]

One rank per GPU (NCCL refuses two ranks on one GPU). At one rank it runs every path once over,
checks the results, and prints the timings, which then measure only the call overhead. Each
figure is the mean time of one eager call (launch included) over --iters calls queued on torch's
current stream, measured with CUDA events after a warm-up; every rank reports, rank 0 prints.
The target (issue 11): aperture <= 0.3x torch NCCL's eager time.

With --graph, every path is also captured in a CUDA graph of --iters calls (torch.cuda.graph) and
timed by replaying it: the figure is then one call's time with the launch overhead gone, the
form a training step that replays graphs sees. --csv FILE writes one row per size and mode.
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch.distributed import _symmetric_memory as symm_mem

import aperture


def timed(fn, iters):
    for _ in range(10):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters  # microseconds per call


def timed_graph(fn, iters, replays=5):
    """Mean time of one call, replayed from a CUDA graph that holds `iters` captured calls."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture: lazy initialisation happens here
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(iters):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0 / (iters * replays)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", default="cuda-ipc")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--sizes", default="4K,16K,64K,256K", help="bytes per rank, K = 1024")
    parser.add_argument("--graph", action="store_true", help="also time every path replayed from a CUDA graph")
    parser.add_argument("--csv", default="", help="write the figures here (rank 0)")
    args = parser.parse_args()
    rows = []
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

    team = aperture.Team.from_env()
    prov = aperture.make_provider(args.provider, team)
    comm = aperture.Communicator(team, prov)
    device = torch.device("cuda", torch.cuda.current_device())
    dist.init_process_group("nccl", device_id=device)
    group = dist.group.WORLD.group_name
    if hasattr(symm_mem, "enable_symm_mem_for_group"):
        symm_mem.enable_symm_mem_for_group(group)

    if team.rank == 0:
        print(f"all_reduce bf16, {team.size} ranks, provider {prov.name}, {args.iters} eager calls each "
              f"({torch.cuda.get_device_name(device)})")
        print(f"{'bytes':>8} {'aperture sym':>13} {'aperture ord':>13} {'torch nccl':>11} {'symm one-shot':>14} "
              f"{'aperture/nccl':>14}")
    for text in args.sizes.split(","):
        nbytes = int(text[:-1]) * 1024 if text.upper().endswith("K") else int(text)
        n = nbytes // 2
        expected = sum((torch.arange(n, device=device) % 13 + r).to(torch.bfloat16).float()
                       for r in range(team.size)).to(torch.bfloat16)
        sym = prov.empty(n, torch.bfloat16)
        ordinary = torch.empty(n, dtype=torch.bfloat16, device=device)
        nccl = torch.empty(n, dtype=torch.bfloat16, device=device)
        symm = symm_mem.empty(n, dtype=torch.bfloat16, device=device)
        symm_mem.rendezvous(symm, group)
        mine = (torch.arange(n, device=device) % 13 + team.rank).to(torch.bfloat16)
        # one checked call of each path before timing it
        for t in (sym, ordinary, nccl, symm):
            t.copy_(mine)
        comm.all_reduce(sym)
        comm.all_reduce(ordinary)
        dist.all_reduce(nccl)
        one_shot = torch.ops.symm_mem.one_shot_all_reduce(symm, "sum", group)
        for name, t in (("aperture symmetric", sym), ("aperture ordinary", ordinary), ("nccl", nccl),
                        ("symm_mem one-shot", one_shot)):
            if not torch.equal(t, expected):
                raise SystemExit(f"rank {team.rank}: {name} all_reduce of {nbytes} bytes is wrong")
        # timings: the values grow, which does not matter for the time (bf16 saturates, never traps)
        paths = (lambda: comm.all_reduce(sym), lambda: comm.all_reduce(ordinary), lambda: dist.all_reduce(nccl),
                 lambda: torch.ops.symm_mem.one_shot_all_reduce(symm, "sum", group))
        for mode, timer in (("eager", timed), ("graph", timed_graph)):
            if mode == "graph" and not args.graph:
                continue
            a_sym, a_ord, t_nccl, t_symm = (timer(fn, args.iters) for fn in paths)
            rows.append((mode, nbytes, a_sym, a_ord, t_nccl, t_symm))
            if team.rank == 0:
                print(f"{nbytes:>8} {a_sym:>10.2f} us {a_ord:>10.2f} us {t_nccl:>8.2f} us {t_symm:>11.2f} us "
                      f"{a_sym / t_nccl:>13.2f}x  {mode}")
        comm.barrier()
        torch.cuda.synchronize()
        team.barrier()
        prov.free(sym)
    comm.close()
    dist.destroy_process_group()
    if team.rank == 0:
        if args.csv:
            with open(args.csv, "w") as out:
                out.write("mode,ranks,bytes,aperture_symmetric_us,aperture_ordinary_us,torch_nccl_us,"
                          "torch_symm_mem_one_shot_us\n")
                for mode, nbytes, *times in rows:
                    out.write(f"{mode},{team.size},{nbytes}," + ",".join(f"{t:.3f}" for t in times) + "\n")
        print("all_reduce bench: done (every path's result checked once per size)")


if __name__ == "__main__":
    main()
