"""``iris.bench``: Iris's declarative benchmarks, on aperture.

A benchmark is a function ``fn(state, ctx)`` under ``@bench.register`` and any number of
``@bench.axis(name, values)``; its body sets up one point of the sweep (untimed), declares what a
call moves (``state.set_bytes``) or computes (``state.set_flops``), and hands over the call to
time with ``state.exec(fn, preamble_fn=...)``. ``bench.main()`` runs every point of the cartesian
product of the axes in a job per value of the ``num_ranks`` axis (8 ranks when there is none), on
an aperture.iris context (``ctx``), and prints the slowest rank's median time per point, the
skew between ranks, and bandwidth or TFLOPS derived from it. ``@bench.env(name, values)`` sweeps
an environment variable that libraries read once per process (``NCCL_MIN_CTAS``): a job per
combination of its values, started with the variable set. Times come from CUDA events on a
GPU and from the host clock without one (heap in host shared memory, torch.distributed on gloo).
``--use_gluon`` is AMD-only and refused. docs/IRIS.md lists how this differs from Iris.

    import iris.bench as bench

    @bench.register
    @bench.axis("num_ranks", [2, 4, 8])
    @bench.axis("M", bench.power_of_two(10, 14))
    def all_gather(state, ctx):
        inp = ctx.zeros(state["M"], 1024)
        out = ctx.zeros(ctx.get_num_ranks() * state["M"], 1024)
        state.set_bytes((ctx.get_num_ranks() - 1) * inp.numel() * inp.element_size())
        state.exec(lambda: ctx.ccl.all_gather(out, inp))

    if __name__ == "__main__":
        bench.main()   # python -m aperture.iris prog.py --skip_num_ranks=8 --axis_M=pow2:10:12
"""

from ._axes import AxisDef, axis, linear_range, power_of_two
from ._cli import main
from ._envs import EnvDef, env
from ._registry import BenchmarkDef, register
from ._result import Result
from ._state import State

__all__ = ["AxisDef", "BenchmarkDef", "EnvDef", "Result", "State", "axis", "env", "linear_range", "main",
           "power_of_two", "register"]
