"""What an Iris context costs on aperture, and what an Iris test that makes one costs around it.

    python examples/iris/context_cost.py [--contexts 5] [--heap-sizes 1M,1G] [--spawns 5] [--ranks 1]

1. In this process: ``--contexts`` contexts of each heap size, one after another, each made, given
   one ``zeros``, and dropped; the milliseconds of each, and of the phases of making one (the job's
   Team, the provider, the heap, the p2p mailboxes, the closing barrier).
2. The way Iris's own tests run (tests/unittests/test_utils.dist_spawn): torch.multiprocessing
   spawns ``--ranks`` fresh processes, which start torch.distributed, do one test's work and end.
   ``--spawns`` times each of two workers, alternating: "baseline" (import Triton, as ``import
   iris`` does, and make a tensor on the device) and "iris" (the same, plus ``iris.iris(1 << 20)``,
   ``zeros``, the test's checks). Their difference is what aperture.iris adds to such a test; the
   baseline is what the process-per-test pattern costs whatever the library.

One rank without a launcher (the spawned workers make their own job). Prints medians; no pass/fail.
"""

import argparse
import os
import socket
import statistics
import sys
import time


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


class PhaseClock:
    """Milliseconds spent in named functions, wrapped in place for this measurement only."""

    def __init__(self):
        self.ms = {}

    def wrap(self, owner, attribute, label):
        inner = getattr(owner, attribute)

        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.ms[label] = self.ms.get(label, 0.0) + 1000 * (time.perf_counter() - began)

        setattr(owner, attribute, timed)


def in_process(args):
    import importlib

    import torch

    import aperture.iris as iris
    from aperture.iris import _heap, _ranks
    from aperture.iris.ccl import p2p

    iris_module = importlib.import_module("aperture.iris.iris")  # the module (aperture.iris.iris is the function)

    clock = PhaseClock()
    clock.wrap(_ranks, "process_team", "team")
    clock.wrap(iris_module, "_provider_for", "provider")
    clock.wrap(_heap.SymmetricHeap, "__init__", "heap + its table")
    clock.wrap(p2p.Mailboxes, "__init__", "p2p mailboxes")
    clock.wrap(iris_module.Iris, "barrier", "barrier")
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    print(f"context_cost: {args.contexts} contexts per heap size, one after another, in this process")
    for size in args.heap_sizes:
        rows = []
        for _ in range(args.contexts):
            clock.ms.clear()
            began = time.perf_counter()
            ctx = iris.iris(size)
            made = time.perf_counter()
            z = ctx.zeros(10, 20, dtype=torch.int8)
            assert bool((z == 0).all())
            sync()
            filled = time.perf_counter()
            del ctx, z
            sync()
            ended = time.perf_counter()
            rows.append((1000 * (made - began), 1000 * (filled - made), 1000 * (ended - filled), dict(clock.ms)))
        first, rest = rows[0], rows[1:] or rows
        med = lambda i: statistics.median(r[i] for r in rest)  # noqa: E731
        print(f"  heap {size} bytes: first context {first[0]:.1f} ms to make; then median {med(0):.1f} ms to make, "
              f"{med(1):.2f} ms for zeros + check, {med(2):.2f} ms to drop")
        phases = ", ".join(f"{name} {statistics.median(r[3].get(name, 0.0) for r in rest):.2f}"
                           for name in first[3])
        print(f"    making one, by phase (median ms): {phases}")


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world_size, init_method, kind):
    import torch
    import torch.distributed as dist

    import triton  # noqa: F401 - `import iris` imports Triton: every Iris test pays it

    cuda = torch.cuda.is_available()
    backend = "nccl" if cuda and torch.cuda.device_count() >= world_size else "gloo"
    if cuda:
        torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group(backend=backend, init_method=init_method, rank=rank, world_size=world_size)
    try:
        device = f"cuda:{torch.cuda.current_device()}" if cuda else "cpu"
        if kind == "iris":
            import aperture.iris as iris

            ctx = iris.iris(1 << 20)
            result = ctx.zeros(10, 20, dtype=torch.int8)
            assert bool((result == 0).all()) and ctx._Iris__on_symmetric_heap(result)
        else:
            result = torch.zeros(10, 20, dtype=torch.int8, device=device)
            assert bool((result == 0).all())
    finally:
        dist.destroy_process_group()


def spawned(args):
    import resource

    import torch.multiprocessing as mp

    def children_cpu():
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    results = {"baseline": [], "iris": []}
    for i in range(args.spawns):
        for kind in (("baseline", "iris") if i % 2 == 0 else ("iris", "baseline")):
            cpu, began = children_cpu(), time.perf_counter()
            mp.spawn(_worker, args=(args.ranks, f"tcp://127.0.0.1:{_free_port()}", kind), nprocs=args.ranks, join=True)
            results[kind].append((time.perf_counter() - began, children_cpu() - cpu))
    print(f"context_cost: Iris's test pattern, {args.spawns} spawns of {args.ranks} rank(s) per worker (medians)")
    walls = {}
    for kind, runs in results.items():
        walls[kind] = statistics.median(w for w, _ in runs)
        print(f"  {kind:8s} {walls[kind]:.2f} s per test ({statistics.median(c for _, c in runs):.2f} s CPU in "
              f"its processes); each: {', '.join(f'{w:.2f}' for w, _ in runs)}")
    print(f"  aperture.iris adds {walls['iris'] - walls['baseline']:+.2f} s to a test of {walls['iris']:.2f} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--contexts", type=int, default=5)
    parser.add_argument("--heap-sizes", default="1M,1G", help="comma-separated, suffix K/M/G (Iris's default: 1G)")
    parser.add_argument("--spawns", type=int, default=5, help="0: skip the spawned part")
    parser.add_argument("--ranks", type=int, default=1, help="processes per spawned test")
    args = parser.parse_args()
    args.heap_sizes = [parse_size(s) for s in args.heap_sizes.split(",")]
    for name in ("RANK", "WORLD_SIZE", "APERTURE_RANK", "OMPI_COMM_WORLD_RANK"):
        if name in os.environ:
            print(f"context_cost: run it without a launcher ({name} is set): it makes its own one-rank jobs")
            return 2
    in_process(args)
    if args.spawns > 0:
        spawned(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
