"""Host time that iris.ccl adds over the same aperture Communicator call (issue 27's 5 % target).

    aperture launch -n 2 -- python examples/iris/ccl_overhead.py [--sizes 4K,1M] [--iters 2000] [--csv FILE]

Times, in one process, the same collective on the same heap tensors through ``ctx.ccl.X`` and
through the Communicator ``ctx.ccl`` uses, interleaved in rounds (alternating which goes first) so
drift hits both alike, and prints a table of per-call microseconds and the added fraction (median
over rounds; the added fraction is the ratio of the two medians, as scripts/perf-table.py
computes it from the CSV). On a GPU the calls are asynchronous, so the time is host (enqueue) time, what the
target is about; a final synchronize keeps the queue from growing without bound. ``--csv`` writes
the rows in `aperture bench --csv`'s form (aperture_us: through iris.ccl; baseline_us: the
Communicator), which bench/targets.toml's row ccl.host_overhead reads. ``all_reduce(x, x)`` is
Iris's in-place form, so both sides make the same one Communicator call.
"""

import argparse
import statistics
import time

import torch

import aperture.iris as iris

CSV_HEADER = ("memory,op,type,ranks,bytes,iters,aperture_us,aperture_GBps,baseline,baseline_us,baseline_GBps,"
              "time_ratio,aperture_busGBps,baseline_busGBps,baseline2,baseline2_us,baseline2_busGBps,time_ratio2")


def per_call_us(fn, iters, sync):
    fn()
    sync()
    began = time.perf_counter()
    for _ in range(iters):
        fn()
    elapsed = time.perf_counter() - began
    sync()
    return elapsed / iters * 1e6


def parse_size(text):
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text[:-1] if scale > 1 else text) * scale


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="4K,1M", help="bytes per rank of each collective's input")
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--csv", default="", help="write the rows here (rank 0)")
    args = parser.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    ctx = iris.iris(64 << 20)
    if 2 * max(sizes) * (ctx.get_num_ranks() + 1) > ctx.heap_size:
        ctx = iris.iris(2 * max(sizes) * (ctx.get_num_ranks() + 1))
    comm = ctx._comm()
    gpu = ctx.get_device().type == "cuda"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    n = ctx.get_num_ranks()
    memory = ctx.provider.name
    rows = []
    for nbytes in sizes:
        numel = max(1, nbytes // 4)
        x = ctx.full((numel,), float(ctx.get_rank() + 1), dtype=torch.float32)
        gathered = ctx.zeros(n * numel, dtype=torch.float32)
        cases = {
            "all_reduce": (lambda: ctx.ccl.all_reduce(x, x), lambda: comm.all_reduce(x)),
            "all_gather": (lambda: ctx.ccl.all_gather(gathered, x), lambda: comm.all_gather(gathered, x)),
            "broadcast": (lambda: ctx.ccl.broadcast(x, src=0), lambda: comm.broadcast(x, 0)),
            "barrier": (lambda: ctx.ccl.barrier(), lambda: comm.barrier()),
        }
        for name, (through_ccl, native) in cases.items():
            if name == "barrier" and nbytes != sizes[0]:
                continue  # no data: once is enough
            ccl_us, native_us = [], []
            for round_ in range(args.rounds):
                first, second = (native, through_ccl) if round_ % 2 == 0 else (through_ccl, native)
                t1 = per_call_us(first, args.iters, sync)
                ctx.barrier()
                t2 = per_call_us(second, args.iters, sync)
                ctx.barrier()
                a, b = (t1, t2) if round_ % 2 == 0 else (t2, t1)
                native_us.append(a)
                ccl_us.append(b)
            c, nat = statistics.median(ccl_us), statistics.median(native_us)
            rows.append((name, 0 if name == "barrier" else nbytes, c, nat, c / nat))
    if ctx.get_rank() == 0:
        print(f"iris.ccl host overhead: {n} rank(s), device {ctx.get_device().type}, memory {memory}, "
              f"{args.iters} calls x {args.rounds} rounds (medians)")
        print(f"{'op':11s} {'bytes':>9s} {'native us':>10s} {'iris.ccl us':>12s} {'added':>8s}")
        for name, nbytes, c, nat, r in rows:
            print(f"{name:11s} {nbytes:9d} {nat:10.2f} {c:12.2f} {100 * (r - 1):+7.2f}%")
        worst = max(r for *_, r in rows)
        print(f"ccl_overhead: done; largest added host time {100 * (worst - 1):+.2f}% (target <= +5%)")
        if args.csv:
            with open(args.csv, "w") as out:
                out.write(CSV_HEADER + "\n")
                for name, nbytes, c, nat, _ in rows:
                    out.write(f"{memory},iris_ccl_{name},float32,{n},{nbytes},{args.iters},{c:.4f},0,"
                              f"Communicator.{name},{nat:.4f},0,{c / nat:.4f},0,0,-,0,0,0\n")
    ctx.barrier()


if __name__ == "__main__":
    main()
