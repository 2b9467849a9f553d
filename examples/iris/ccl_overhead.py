"""Host time that iris.ccl adds over the same aperture Communicator call (issue 27's 5 % target).

    aperture launch -n 1 -- python examples/iris/ccl_overhead.py [--sizes 4K,1M] [--iters 2000]
        [--rounds 7] [--batch 100] [--csv FILE]

Times, in one process, the same collective on the same heap tensors through ``ctx.ccl.X`` and
through the Communicator ``ctx.ccl`` uses. Each op takes ``--rounds`` rounds of ``--iters`` calls of
each form; a round alternates the forms batch by batch, A B B A A B B A ... (``--batch`` calls a
turn; which form is A alternates between rounds), so drift, and a pause of the machine longer than
a batch, weigh on both forms alike (with four long quarters a round, A B B A, the rounds of one
H200 run scattered from -22 % to +9 %: 2026-12-05 run 36). Every call is
timed on its own, and a form's figure for a round is the median of its ``--iters`` calls: a call
that waited for the OS or for the other process's time slice on a shared GPU moves a mean by
milliseconds, a median not at all (at 2 ranks on one H200 the means of 50 calls scattered from
-77 % to +21 % between rounds, 2026-12-04 run 14). The table gives the median over rounds of each
form, the added fraction as the ratio of the two medians (what scripts/perf-table.py computes from
the CSV), and the lowest and highest ratio of a single round (how far the rounds scatter).
``all_reduce(x, x)`` is Iris's in-place form, so both sides make the same one Communicator call.

On a GPU the calls are asynchronous: the figure is host (enqueue) time, which is what the target is
about. The calls go in batches of ``--batch``, and the stream is synchronized between batches,
untimed: the launch queue never fills, so a call's time never turns into the GPU's time.

At 2 ranks sharing one GPU (bench/gpu-compare.sh's step iris-ccl-overhead-np2) the two processes
time-slice the GPU, so a collective completes only after a switch between them: about 2.3 ms a call
on an H200 (aperture bench, 2026-12-02), against about 10 us of host time. The figure is still the
host time of a launch whose peer is another process (the batches keep the queue from filling); the
GPU's time is not in it. The run's length is the GPU's: 2 sides x 7 rows x ``--rounds`` x
``--iters`` collectives (98 x iters with the defaults), so gpu-compare's --iters 100 there takes
about 23 s of them; each op's progress line gives its seconds, so a slow run shows where it is.
A figure is only as quiet as the machine: run it alone, not beside other GPU or CPU work.

``--csv`` writes the rows in `aperture bench --csv`'s form (aperture_us: through iris.ccl;
baseline_us: the Communicator), which bench/targets.toml's row iris.ccl.host_overhead reads.
"""

import argparse
import statistics
import time

import torch

import aperture.iris as iris
from aperture._bench_csv import write_rows


def call_seconds(fn, calls, batch, sync):
    """Each of `calls` calls of fn, timed on its own, in batches with the stream drained between
    them (untimed), so a GPU's launch queue never fills and the time stays the host's."""
    times = []
    while calls > 0:
        n = min(batch, calls)
        for _ in range(n):
            began = time.perf_counter()
            fn()
            times.append(time.perf_counter() - began)
        sync()
        calls -= n
    return times


def per_round_us(forms, iters, batch, sync, first):
    """One round, the forms taking turns of a batch in the order A B B A A B B A ... (forms[first]
    is A): each form's median microseconds per call, in the order of forms."""
    times = ([], [])
    turn = (first, 1 - first)
    done = 0
    while done < iters:
        n = min(batch, iters - done)
        for form in turn:
            times[form].extend(call_seconds(forms[form], n, batch, sync))
        turn = turn[::-1]
        done += n
    return statistics.median(times[0]) * 1e6, statistics.median(times[1]) * 1e6


def parse_size(text):
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text[:-1] if scale > 1 else text) * scale


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="4K,1M", help="bytes per rank of each collective's input")
    parser.add_argument("--iters", type=int, default=2000, help="calls of each form per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=int, default=100,
                        help="calls between two (untimed) synchronizations; small enough that the launch queue never fills")
    parser.add_argument("--csv", default="", help="write the rows here (rank 0)")
    args = parser.parse_args()
    if args.iters < 2 or args.rounds < 1 or args.batch < 1:
        parser.error("--iters must be at least 2, --rounds and --batch at least 1")
    sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    ctx = iris.iris(64 << 20)
    if 2 * max(sizes) * (ctx.get_num_ranks() + 1) > ctx.heap_size:
        ctx = iris.iris(2 * max(sizes) * (ctx.get_num_ranks() + 1))
    comm = ctx._comm()
    gpu = ctx.get_device().type == "cuda"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    n = ctx.get_num_ranks()
    memory = ctx.provider.name
    lead = ctx.get_rank() == 0

    def say(text):
        if lead:
            print(text, flush=True)

    say(f"iris.ccl host overhead: {n} rank(s), device {ctx.get_device().type}, memory {memory}, {args.iters} calls "
        f"of each form x {args.rounds} rounds, in batches of {args.batch} (each call timed; medians)")
    rows = []
    for nbytes in sizes:
        numel = max(1, nbytes // 4)
        x = ctx.full((numel,), float(ctx.get_rank() + 1), dtype=torch.float32)
        gathered = ctx.zeros(n * numel, dtype=torch.float32)
        cases = {
            "all_reduce": (lambda: comm.all_reduce(x), lambda: ctx.ccl.all_reduce(x, x)),
            "all_gather": (lambda: comm.all_gather(gathered, x), lambda: ctx.ccl.all_gather(gathered, x)),
            "broadcast": (lambda: comm.broadcast(x, 0), lambda: ctx.ccl.broadcast(x, src=0)),
            "barrier": (lambda: comm.barrier(), lambda: ctx.ccl.barrier()),
        }
        for name, forms in cases.items():
            if name == "barrier" and nbytes != sizes[0]:
                continue  # no data: once is enough
            began = time.perf_counter()
            for form in forms:  # first calls (caches, lazy state) out of the timing
                form()
            sync()
            ctx.barrier()
            native_us, ccl_us = [], []
            for round_ in range(args.rounds):
                nat, c = per_round_us(forms, args.iters, args.batch, sync, round_ % 2)
                native_us.append(nat)
                ccl_us.append(c)
                ctx.barrier()
            c, nat = statistics.median(ccl_us), statistics.median(native_us)
            ratios = [a / b for a, b in zip(ccl_us, native_us)]
            rows.append((name, 0 if name == "barrier" else nbytes, c, nat, c / nat, min(ratios), max(ratios)))
            say(f"ccl_overhead: {name} {rows[-1][1]} B: native {nat:.2f} us, iris.ccl {c:.2f} us "
                f"({100 * (c / nat - 1):+.2f}%), {2 * args.rounds * args.iters} calls in "
                f"{time.perf_counter() - began:.1f} s")
    if lead:
        print(f"{'op':11s} {'bytes':>9s} {'native us':>10s} {'iris.ccl us':>12s} {'added':>8s}   rounds' added")
        for name, nbytes, c, nat, r, lo, hi in rows:
            print(f"{name:11s} {nbytes:9d} {nat:10.2f} {c:12.2f} {100 * (r - 1):+7.2f}%   "
                  f"{100 * (lo - 1):+.2f}%..{100 * (hi - 1):+.2f}%")
        worst = max(row[4] for row in rows)
        print(f"ccl_overhead: done; largest added host time {100 * (worst - 1):+.2f}% (target <= +5%)", flush=True)
        if args.csv:
            write_rows(args.csv, [dict(memory=memory, op=f"iris_ccl_{name}", type="float32", ranks=n, bytes=nbytes,
                                       iters=args.iters, aperture_us=c, baseline=f"Communicator.{name}", baseline_us=nat)
                                  for name, nbytes, c, nat, *_ in rows], bandwidth=False)
    ctx.barrier()


if __name__ == "__main__":
    main()
