"""The Python cost of a compiled Triton kernel's launch with and without Triton 3.6's launch-hook
work, on a machine without a GPU: a stand-in compiled kernel (no module, its launcher a no-op), so
neither figure holds the C launcher or the driver. Forms, each called with all_reduce_rmsnorm's 23
launch arguments:
- Triton's CompiledKernel[grid] runner: current device and stream, launch_metadata (a LazyDict
  while the hook chains exist), the launcher with both chains;
- aperture's _DirectLaunch with no hook registered: the stream, the launcher with no hooks;
- the hooks' part alone: launch_metadata and a call of each (empty) chain, as the C launcher does.
Median of 7 rounds of 20000 calls. Run: python launch_hooks.py (PYTHONPATH: the staged package)."""
import statistics
import time

import torch
import triton
import triton.compiler.compiler as compiler

from aperture.iris.ccl import _fused


class StandInCompiled(compiler.CompiledKernel):
    def __init__(self):  # no module to load
        self.function, self.packed_metadata, self.name, self.src = "function", "metadata", "kernel", None

    def _init_handles(self):
        pass

    def run(self, *launch):
        pass


class StandInDriver:
    def get_current_device(self):
        return 0

    def get_current_stream(self, device):
        return 0


compiler.driver._active = StandInDriver()
kernel, grid = StandInCompiled(), (32, 1, 1)
args = tuple(range(16)) + (0, 2, False, 1, 8192, 1, True)  # 16 arguments and the 7 constexprs
tritons = kernel[grid]
direct = _fused._DirectLaunch(kernel, grid)
hooks = triton.knobs.runtime


def hook_work():
    metadata = kernel.launch_metadata(grid, 0, *args)
    hooks.launch_enter_hook(metadata)
    hooks.launch_exit_hook(metadata)


def per_call_us(fn, calls=20000):
    rounds = []
    for _ in range(7):
        began = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - began) / calls * 1e6)
    return statistics.median(rounds)


print(f"triton {triton.__version__}, torch {torch.__version__}; hook chains: {type(hooks.launch_enter_hook).__name__}, "
      f"{len(hooks.launch_enter_hook.calls)} and {len(hooks.launch_exit_hook.calls)} hooks")
for name, fn in (("Triton's CompiledKernel[grid]", lambda: tritons(*args)),
                 ("_DirectLaunch, no hook registered", lambda: direct(0, *args)),
                 ("the hooks' part alone", hook_work)):
    print(f"  {name:>34}: {per_call_us(fn):.2f} us a launch")
