"""iris.concurrent.gemm against what a program would do without it: the time of a local GEMM and
an independent collective, both modes, against the two done one after the other, and against the
two overlapped by hand on two streams.

    aperture launch -n N -- python bench/python/concurrent_gemm.py [--ops all_gather,all_reduce]
        [--gemm 8192x8192x8192] [--comm 8192x4096] [--dtype bfloat16] [--warmup 5] [--iters 20]
        [--csv FILE]

Per op, on the same heap tensors (C = A @ B, comm_src (Mc, Nc) -> comm_dst):
- fused:      iris.concurrent.gemm.<op>(..., mode="fused"), one persistent kernel;
- concurrent: the same with mode="concurrent", a kernel per queue on two streams;
- sequential: torch.matmul (cuBLAS) into C, then the aperture Communicator's collective;
- overlapped: the same two calls, the collective on a second stream (joined back).
Every call sits between two ctx.barrier()s (iris.concurrent's contract: comm_src written on every
rank before, comm_dst complete after) and is timed with iris.do_bench (CUDA events on the current
stream; the host's clock without a GPU), median of --iters. Ratios are of times (below 1: faster
than sequential). The GEMM is rank-local, so at one rank the collective is a local copy or sum,
and ranks sharing one GPU time-slice it: the overlap that matters needs a GPU per rank. On a host
heap (no GPU) the kernels run under Triton's interpreter: a run checks the program, its times mean
nothing (test_iris_concurrent runs it so, with tiny sizes).
"""

import argparse

import torch

import aperture.iris as iris
from aperture.iris._ranks import process_team
from aperture.iris.concurrent import gemm

CSV_HEADER = "op,type,ranks,gemm,comm,fused_ms,concurrent_ms,sequential_ms,overlapped_ms,fused_ratio,concurrent_ratio"
OPS = ("all_gather", "all_reduce", "reduce_scatter", "all_to_all", "broadcast")


def shape(text, parts):
    values = tuple(int(v) for v in text.lower().split("x"))
    if len(values) != parts or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: want {parts} positive sizes joined by 'x'")
    return values


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", default=",".join(OPS), help="comma-separated, of " + ", ".join(OPS))
    p.add_argument("--gemm", type=lambda t: shape(t, 3), default=(8192, 8192, 8192), help="M x N x K")
    p.add_argument("--comm", type=lambda t: shape(t, 2), default=(8192, 4096), help="Mc x Nc of comm_src")
    p.add_argument("--dtype", default="bfloat16", choices=("float16", "bfloat16", "float32"))
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--csv", help="write the rows here (rank 0)")
    args = p.parse_args(argv)
    args.ops = [op for op in args.ops.split(",") if op]
    unknown = [op for op in args.ops if op not in OPS]
    if unknown:
        p.error(f"unknown op(s) {unknown}; choose from {', '.join(OPS)}")
    return args


def collective_alone(ctx, op, src, dst):
    """The op's collective through the aperture Communicator ctx.ccl uses (same sizes and result
    as iris.concurrent's; all_to_all moves equal row blocks, broadcast is from rank 0)."""
    comm = ctx._comm()
    if op == "all_gather":
        return lambda: comm.all_gather(dst, src)
    if op == "all_reduce":
        return lambda: (dst.copy_(src), comm.all_reduce(dst))
    if op == "reduce_scatter":
        return lambda: comm.reduce_scatter(dst, src)
    if op == "all_to_all":
        return lambda: comm.all_to_all(dst, src)
    return lambda: (dst.copy_(src), comm.broadcast(dst, 0))


def main(argv=None):
    args = parse(argv)
    dtype = getattr(torch, args.dtype)
    (M, N, K), (Mc, Nc) = args.gemm, args.comm
    team = process_team()  # the ranks iris.iris takes, known before the heap is sized
    world = team.size
    dst_rows = {"all_gather": world * Mc, "reduce_scatter": Mc // world}
    heap = 2 * (M * K + K * N + M * N + Mc * Nc * (world + 1)) * dtype.itemsize + (64 << 20)
    if Mc % world:
        raise SystemExit(f"concurrent_gemm: --comm rows ({Mc}) must be a multiple of the {world} ranks")
    ctx = iris.iris(heap, team=team)
    rank = ctx.get_rank()
    A, B, C = ctx.randn(M, K, dtype=dtype), ctx.randn(K, N, dtype=dtype), ctx.zeros(M, N, dtype=dtype)
    src = ctx.randn(Mc, Nc, dtype=dtype)
    gpu = ctx.get_device().type == "cuda"
    side = torch.cuda.Stream(ctx.get_device()) if gpu else None
    rows = []
    for op in args.ops:
        dst = ctx.zeros(dst_rows.get(op, Mc), Nc, dtype=dtype)
        collective = collective_alone(ctx, op, src, dst)

        def sequential():
            torch.matmul(A, B, out=C)
            collective()

        def overlapped():
            if side is None:  # no streams on a host heap: the calls run one after the other
                return sequential()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                collective()
            torch.matmul(A, B, out=C)
            torch.cuda.current_stream().wait_stream(side)

        forms = {"fused": lambda: getattr(gemm, op)(ctx, A, B, src, C=C, comm_dst=dst, mode="fused"),
                 "concurrent": lambda: getattr(gemm, op)(ctx, A, B, src, C=C, comm_dst=dst, mode="concurrent"),
                 "sequential": sequential, "overlapped": overlapped}
        ms = {name: iris.do_bench(fn, barrier_fn=ctx.barrier, n_warmup=args.warmup, n_repeat=args.iters,
                                  return_mode="median") for name, fn in forms.items()}
        row = dict(op=op, ms=ms, fused_ratio=ms["fused"] / ms["sequential"],
                   concurrent_ratio=ms["concurrent"] / ms["sequential"])
        rows.append(row)
        if rank == 0:
            print(f"concurrent_gemm: {op:14s} fused {ms['fused']:9.3f} ms  concurrent {ms['concurrent']:9.3f} ms  "
                  f"sequential {ms['sequential']:9.3f} ms  overlapped {ms['overlapped']:9.3f} ms  "
                  f"fused/seq {row['fused_ratio']:.2f}x  concurrent/seq {row['concurrent_ratio']:.2f}x", flush=True)
    if rank == 0 and args.csv:
        with open(args.csv, "w") as f:
            f.write(CSV_HEADER + "\n")
            for r in rows:
                f.write(f"{r['op']},{args.dtype},{world},{M}x{N}x{K},{Mc}x{Nc},{r['ms']['fused']:.4f},"
                        f"{r['ms']['concurrent']:.4f},{r['ms']['sequential']:.4f},{r['ms']['overlapped']:.4f},"
                        f"{r['fused_ratio']:.4f},{r['concurrent_ratio']:.4f}\n")
    ctx.barrier()


if __name__ == "__main__":
    main()
