"""iris.ccl.all_reduce_rmsnorm (aperture's one fused Triton kernel) against the unfused
all-reduce followed by torch's RMSNorm, M = 1..128 rows of 8192 bfloat16.

    aperture launch -n 2 -- python bench/python/iris_rmsnorm.py [--provider cuda-ipc] [--iters 200]
    aperture launch -n 1 -- python bench/python/iris_rmsnorm.py        # one GPU: a function check

Baselines: aperture.Communicator.all_reduce + torch.nn.functional.rms_norm, and, when every
rank has a GPU of its own, torch.distributed.all_reduce (NCCL) + rms_norm. Every path's result
is checked against the fp32 reference before it is timed (and the fused one again after, without
--residual). Per path and size, after --warmup calls:
- eager: the mean time of one eager call (launch included) over --iters calls queued on torch's
  current stream (CUDA events): what a program sees, and what the target compares;
- host: the mean host time of one call (perf_counter, no synchronisation): the Python and launch cost;
- gpu: the mean GPU time of one call: the calls are queued behind a sleeping kernel, so they run
  back to back with no host gap (marked '?' where the host was slower than the sleep; across
  ranks, the first calls also wait out the skew between the ranks' sleeps);
- the slowest single call's host time, where it is over 1 ms and 10x the mean (a compile or an
  allocation inside the timed calls), on a line of its own.
The target (issue 27, on 2 GPUs): fused eager <= 0.7x the unfused eager time. At one rank the
figures measure one GPU's kernels with no peer, and the eager time is mostly host time.
With --residual, both sides also add the residual (Iris's full operation).
--csv FILE (rank 0) writes a row per size in `aperture bench --csv`'s form, which
scripts/perf-table.py reads (op iris_all_reduce_rmsnorm, bytes the rows' bf16 bytes,
aperture_us the fused eager time, the baseline the faster unfused path's eager time).
"""

import argparse
import os
import time
import types

import torch
import torch.distributed as dist

import aperture
import aperture.iris as iris
from aperture._bench_csv import write_rows
from aperture.iris.ccl._fused import all_reduce_rmsnorm


def timed(fn, iters, warmup):
    """(eager, host, gpu, gpu_clean, slowest) per call, microseconds: see the module's docstring."""
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    slowest = 0.0
    start.record()
    for _ in range(iters):
        began = time.perf_counter()
        fn()
        slowest = max(slowest, time.perf_counter() - began)
    end.record()
    torch.cuda.synchronize()
    eager = start.elapsed_time(end) * 1000.0 / iters
    # Host: each call's enqueue time (the GPU runs behind; the queue holds far more than iters calls).
    calls = []
    for _ in range(iters):
        began = time.perf_counter()
        fn()
        calls.append(time.perf_counter() - began)
    torch.cuda.synchronize()
    host = sum(calls) * 1e6 / iters
    # GPU: the calls queued behind a sleep twice as long as their host time (at 2 GHz; a slower
    # clock sleeps longer), so they run back to back.
    torch.cuda._sleep(int(max(2 * sum(calls), 1e-3) * 2e9))
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    clean = not start.query()  # the sleep still ran when the last call was queued
    torch.cuda.synchronize()
    gpu = start.elapsed_time(end) * 1000.0 / iters
    return eager, host, gpu, clean, max(slowest, *calls) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", default=os.environ.get("APERTURE_PROVIDER", "cuda-ipc"))
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=40,
                        help="untimed calls first (more than 16: any variant the first calls compile is made here)")
    parser.add_argument("--hidden", type=int, default=8192)
    parser.add_argument("--rows", default="1,2,4,8,16,32,64,128")
    parser.add_argument("--residual", action="store_true")
    parser.add_argument("--csv", default="", help="write the rows here (rank 0)")
    args = parser.parse_args()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ["APERTURE_PROVIDER"] = args.provider

    team = aperture.Team.from_env()
    ctx = iris.iris(1 << 30, team=team)
    device = ctx.get_device()
    comm = aperture.Communicator(team, ctx.provider)
    own_gpus = team.size <= torch.cuda.device_count()
    if own_gpus and team.size > 1:
        dist.init_process_group("nccl", device_id=device)
    hidden, eps = args.hidden, 1e-6
    weight = (torch.arange(hidden, device=device) % 5 * 0.25 + 0.5).to(torch.bfloat16)
    if team.rank == 0:
        print(f"all_reduce_rmsnorm bf16, hidden {hidden}, {team.size} ranks, provider {ctx.provider.name}, "
              f"{args.iters} eager calls each ({torch.cuda.get_device_name(device)}){' with residual' * args.residual}")
        print("eager / host / gpu: microseconds per call (see the docstring); ratios of the eager times")
        print(f"{'rows':>5} {'fused eager/host/gpu':>23} {'aperture AR+norm e/h/g':>25} {'nccl AR+norm e/h/g':>23} "
              f"{'fused/aperture':>15} {'fused/nccl':>11}")
    worst = 0.0
    csv_rows = []
    for rows in (int(r) for r in args.rows.split(",")):
        def mine(rank):
            g = torch.Generator().manual_seed(rank * 31 + rows)
            return torch.randn(rows, hidden, generator=g).to(torch.bfloat16).to(device)

        partial = ctx.zeros((rows, hidden), dtype=torch.bfloat16)
        partial.copy_(mine(team.rank))
        start_residual = (torch.arange(rows * hidden, device=device).reshape(rows, hidden) % 9 * 0.1).to(
            torch.bfloat16)
        residual = ctx.zeros((rows, hidden), dtype=torch.bfloat16) if args.residual else None
        workspace = types.SimpleNamespace(norm_out=None)
        reduced = sum(mine(r).float() for r in range(team.size)).to(torch.bfloat16)
        x = reduced + start_residual if args.residual else reduced
        expected = torch.nn.functional.rms_norm(x, (hidden,), weight, eps).float()
        ordinary = torch.empty_like(partial)
        ordinary_residual = start_residual.clone()

        def fused():
            return all_reduce_rmsnorm(ctx, partial, residual, weight, eps=eps, async_op=True, workspace=workspace)

        def unfused(all_reduce):
            all_reduce(ordinary)
            y = ordinary
            if args.residual:
                y = ordinary_residual.add_(ordinary)
            return torch.nn.functional.rms_norm(y, (hidden,), weight, eps)

        # One checked call of each path before timing it.
        if residual is not None:
            residual.copy_(start_residual)
        ctx.barrier()
        checks = [("fused", fused)]
        ordinary.copy_(partial)
        checks.append(("aperture", lambda: unfused(comm.all_reduce)))
        for name, fn in checks:
            got = fn().float()
            if not torch.allclose(got, expected, rtol=2 ** -5, atol=2 ** -5):
                raise SystemExit(f"rank {team.rank}: {name} all_reduce_rmsnorm of {rows} rows is wrong "
                                 f"(max error {(got - expected).abs().max().item():.3g})")
        if own_gpus and team.size > 1:
            ordinary.copy_(partial)
            ordinary_residual.copy_(start_residual)
            got = unfused(dist.all_reduce).float()
            if not torch.allclose(got, expected, rtol=2 ** -5, atol=2 ** -5):
                raise SystemExit(f"rank {team.rank}: nccl all_reduce + rms_norm of {rows} rows is wrong")
        # Timings (values grow with repeated reductions and the residual; bf16 does not trap).
        nan = (float("nan"),) * 4 + (0.0,)
        t_fused = timed(fused, args.iters, args.warmup)
        t_ap = timed(lambda: unfused(comm.all_reduce), args.iters, args.warmup)
        t_nccl = timed(lambda: unfused(dist.all_reduce), args.iters, args.warmup) if own_gpus and team.size > 1 else nan
        if residual is None:  # the fused result is the same on every call: checked again after the timed calls
            got = fused().float()
            if not torch.allclose(got, expected, rtol=2 ** -5, atol=2 ** -5):
                raise SystemExit(f"rank {team.rank}: fused all_reduce_rmsnorm of {rows} rows is wrong after the "
                                 f"timed calls (max error {(got - expected).abs().max().item():.3g})")
        ratio = t_fused[0] / min(t_ap[0], t_nccl[0]) if t_nccl[0] == t_nccl[0] else t_fused[0] / t_ap[0]
        worst = max(worst, ratio)
        nccl_faster = t_nccl[0] == t_nccl[0] and t_nccl[0] < t_ap[0]
        csv_rows.append(dict(memory=ctx.provider.name, op="iris_all_reduce_rmsnorm" + "_residual" * args.residual,
                             type="bfloat16", ranks=team.size, bytes=rows * hidden * 2, iters=args.iters,
                             aperture_us=t_fused[0],
                             baseline="nccl_all_reduce+rms_norm" if nccl_faster else "aperture_all_reduce+rms_norm",
                             baseline_us=t_nccl[0] if nccl_faster else t_ap[0]))

        def cell(t):
            return f"{t[0]:.1f}/{t[1]:.1f}/{t[2]:.1f}{'' if t[3] else '?'}"

        if team.rank == 0:
            print(f"{rows:>5} {cell(t_fused):>23} {cell(t_ap):>25} {cell(t_nccl):>23} {t_fused[0] / t_ap[0]:>14.2f}x "
                  f"{t_fused[0] / t_nccl[0]:>10.2f}x")
            for path, t in (("fused", t_fused), ("aperture", t_ap), ("nccl", t_nccl)):
                if t[4] > max(10 * t[1], 1000.0):
                    print(f"      note: a {path} call of {rows} rows took {t[4]:.0f} us of host time, over 10x the "
                          f"host mean {t[1]:.1f} us: something compiled or allocated inside the timed calls")
        ctx.barrier()
    if team.rank == 0 and args.csv:
        write_rows(args.csv, csv_rows)
    if team.rank == 0:
        target = "met" if worst <= 0.7 else "NOT met"
        print(f"iris_rmsnorm bench: done (every path checked once per size); worst fused/best-unfused {worst:.2f}x "
              f"(target <= 0.7x on 2 GPUs: {target}{'; one rank: function check only' * (team.size == 1)})")
    comm.close()
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
