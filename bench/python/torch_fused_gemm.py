"""Baseline (c) of `aperture bench --ops ag_gemm,gemm_rs`: torch's symmetric-memory async-TP ops
(torch.ops.symm_mem.fused_all_gather_matmul / fused_matmul_reduce_scatter, what
torch.distributed._symmetric_memory._fused_all_gather_matmul / _fused_matmul_reduce_scatter
call) at the same Llama-3-70B MLP shapes, with torch's unfused pair (NCCL collective + torch.mm,
one stream) beside them as a cross-check of the C++ bench's baseline (a); and, where the Python
package is installed, aperture's own OverlappedGemm called from Python (aperture.OverlappedGemm on
--aperture-provider, "" to leave it out) in the same processes, on the same inputs.

    torchrun --nproc-per-node 2 bench/python/torch_fused_gemm.py [--gemm-m 128,1024,4096,16384] [--csv out.csv]

Each figure: median over --trials trials of the mean of --iters back-to-back calls (CUDA events
on the current stream), after a barrier, the slowest rank's. NVLink multicast stays off
(TORCH_SYMM_MEM_DISABLE_MULTICAST=1). Prints one line per op and M, and a CSV if asked.
"""
import argparse
import os
import statistics
import sys

os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

HIDDEN, INTERMEDIATE = 8192, 28672


def timed(fn, trials, iters):
    fn()
    fn()
    torch.cuda.synchronize()
    means = []
    for _ in range(trials):
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        mine = torch.tensor([start.elapsed_time(end) * 1e3 / iters], device="cuda")
        dist.all_reduce(mine, op=dist.ReduceOp.MAX)
        means.append(mine.item())
    return statistics.median(means)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gemm-m", default="128,1024,4096,16384")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--csv", default="")
    parser.add_argument("--aperture-provider", default="default",
                        help="provider of aperture.OverlappedGemm's buffers (\"\": no aperture rows)")
    args = parser.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    world, rank = dist.get_world_size(), dist.get_rank()
    group = dist.group.WORLD
    group_name = group.group_name
    import torch.distributed._symmetric_memory as symm_mem

    if hasattr(symm_mem, "enable_symm_mem_for_group"):
        symm_mem.enable_symm_mem_for_group(group_name)

    tp = None
    if args.aperture_provider:
        try:
            import aperture

            team = aperture.Team.from_env()  # torchrun's variables; its hub takes MASTER_PORT + 1
            tp = aperture.OverlappedGemm(team, aperture.make_provider(args.aperture_provider, team))
        except (ImportError, AttributeError, RuntimeError) as e:  # not installed, too old, or cannot run here
            tp = None
            if rank == 0:
                print(f"no aperture rows: {type(e).__name__}: {e}", file=sys.stderr)

    rows = []
    for m in [int(x) for x in args.gemm_m.split(",") if x]:
        if m % world:
            continue
        for op in ("ag_gemm", "gemm_rs"):
            gather = op == "ag_gemm"
            k = HIDDEN if gather else INTERMEDIATE // world
            n = INTERMEDIATE // world if gather else HIDDEN
            a = torch.randn((m // world if gather else m, k), device="cuda", dtype=torch.bfloat16)
            b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
            if gather:
                full = torch.empty((m, k), device="cuda", dtype=torch.bfloat16)

                def fused():
                    torch.ops.symm_mem.fused_all_gather_matmul(a, [b], 0, group_name)

                def unfused():
                    dist.all_gather_into_tensor(full, a)
                    torch.mm(full, b)

                def ours():
                    tp.ag_gemm(a, b, out=c)

                c = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
            else:
                out = torch.empty((m // world, n), device="cuda", dtype=torch.bfloat16)

                def fused():
                    torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, group_name)

                def unfused():
                    dist.reduce_scatter_tensor(out, torch.mm(a, b))

                def ours():
                    tp.gemm_rs(a, b, out=out)

            try:
                t_fused = timed(fused, args.trials, args.iters)
            except Exception as e:  # noqa: BLE001 - report why, keep the other figures
                t_fused = float("nan")
                if rank == 0:
                    print(f"{op} M={m}: torch fused op failed: {type(e).__name__}: {e}", file=sys.stderr)
            t_unfused = timed(unfused, args.trials, args.iters)
            t_ours = timed(ours, args.trials, args.iters) if tp is not None else float("nan")
            rows.append((op, m, n, k, world, t_fused, t_unfused, t_ours))
            if rank == 0:
                print(f"{op} M={m} n={n} k={k} x {world} ranks: (c) torch fused {t_fused:.1f} us, "
                      f"torch unfused (NCCL + mm) {t_unfused:.1f} us, aperture.OverlappedGemm from Python "
                      f"{t_ours:.1f} us", flush=True)
            del a, b
            torch.cuda.empty_cache()
    if rank == 0 and args.csv:
        with open(args.csv, "w") as f:
            f.write("op,m,n,k,ranks,torch_fused_us,torch_unfused_us,aperture_python_us\n")
            for r in rows:
                f.write(",".join(str(x) for x in r) + "\n")
    if tp is not None:
        tp.check()
        tp.close()  # collective, before the process group goes
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
