"""Host time that iris.ccl adds over the same aperture Communicator call.

    aperture launch -n 2 -- python examples/iris/ccl_overhead.py [--numel 1024] [--iters 2000]

Times, in one process, the same collective on the same heap tensors through ``ctx.ccl.X`` and
through the Communicator ``ctx.ccl`` uses, interleaved in rounds (alternating which goes first) so drift hits both alike, and
prints per-call microseconds and the added fraction (median over rounds). On a GPU the calls
are asynchronous, so the time is host (enqueue) time, what the 5 % target is about; a final
synchronize keeps the queue from growing without bound.
"""

import argparse
import statistics
import time

import torch

import aperture.iris as iris


def per_call_us(fn, iters, sync):
    fn()
    sync()
    began = time.perf_counter()
    for _ in range(iters):
        fn()
    elapsed = time.perf_counter() - began
    sync()
    return elapsed / iters * 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--numel", type=int, default=1024)
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    ctx = iris.iris(64 << 20)
    comm = ctx._comm()
    gpu = ctx.get_device().type == "cuda"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    n = ctx.get_num_ranks()
    x = ctx.ones(args.numel, dtype=torch.float32)
    gathered = ctx.zeros(n * args.numel, dtype=torch.float32)
    cases = {
        "all_reduce": (lambda: ctx.ccl.all_reduce(x, x), lambda: comm.all_reduce(x)),
        "all_gather": (lambda: ctx.ccl.all_gather(gathered, x), lambda: comm.all_gather(gathered, x)),
        "broadcast": (lambda: ctx.ccl.broadcast(x, src=0), lambda: comm.broadcast(x, 0)),
        "barrier": (lambda: ctx.ccl.barrier(), lambda: comm.barrier()),
    }
    for name, (through_ccl, native) in cases.items():
        ratios, ccl_us, native_us = [], [], []
        for round_ in range(args.rounds):
            first, second = (native, through_ccl) if round_ % 2 == 0 else (through_ccl, native)
            x1 = per_call_us(first, args.iters, sync)
            ctx.barrier()
            x2 = per_call_us(second, args.iters, sync)
            ctx.barrier()
            a, b = (x1, x2) if round_ % 2 == 0 else (x2, x1)
            native_us.append(a)
            ccl_us.append(b)
            ratios.append(b / a)
        if ctx.get_rank() == 0:
            print(f"{name:11s} ranks={n} numel={args.numel} device={ctx.get_device().type}: native "
                  f"{statistics.median(native_us):8.2f} us, iris.ccl {statistics.median(ccl_us):8.2f} us, "
                  f"added {100 * (statistics.median(ratios) - 1):+6.2f} % (median of {args.rounds} rounds)")
    ctx.barrier()


if __name__ == "__main__":
    main()
