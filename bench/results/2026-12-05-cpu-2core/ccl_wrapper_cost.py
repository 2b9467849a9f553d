"""What iris.ccl's broadcast and all_reduce wrappers add to a call, on the host alone: the same
context's ccl with its Communicator swapped for one whose methods do nothing, against calling
that object directly. Run: PYTHONPATH=<installed aperture> APERTURE_PROVIDER=shm python3 ccl_wrapper_cost.py"""
import time

import torch

import aperture.iris as iris

ctx = iris.iris(1 << 24)
x = ctx.full((1024,), 1.0, dtype=torch.float32)
ctx.ccl.broadcast(x, src=0)  # makes the Communicator, then it is swapped out


class DoesNothing:
    def broadcast(self, tensor, src):
        pass

    def all_reduce(self, *args, **kwargs):
        pass


null = DoesNothing()
ctx.ccl._comm = null


def ns_per_call(call, n=200000):
    best = []
    for _ in range(5):
        began = time.perf_counter_ns()
        for _ in range(n):
            call()
        best.append((time.perf_counter_ns() - began) / n)
    return min(best)


direct = ns_per_call(lambda: null.broadcast(x, 0))
print(f"the do-nothing communicator called directly: {direct:.0f} ns")
for name, call in [("ctx.ccl.broadcast(x, src=0)", lambda: ctx.ccl.broadcast(x, src=0)),
                   ("ctx.ccl.all_reduce(x, x)", lambda: ctx.ccl.all_reduce(x, x))]:
    took = ns_per_call(call)
    print(f"{name}: {took:.0f} ns, {took - direct:.0f} ns added")
