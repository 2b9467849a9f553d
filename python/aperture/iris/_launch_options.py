"""Launch options that only AMD's Triton backend knows, dropped on NVIDIA.

Iris kernels are tuned for AMD GPUs and are often launched with HIP-only compiler options
(``kernel[grid](..., waves_per_eu=2, matrix_instr_nonkdim=16)``, or the same keys in a
``triton.Config``). Triton's NVIDIA backend refuses every option it does not know ("Keyword
argument waves_per_eu was specified but unrecognised"), so such a program would fail after
the import change alone. Importing aperture.iris therefore makes compiled launches drop the
options that AMD's backend has and NVIDIA's has not, when the active backend is not AMD's;
they only steer AMD's code generation, so dropping them changes no result. A kernel parameter
that happens to share such a name is never dropped. APERTURE_IRIS_KEEP_AMD_OPTIONS=1 turns
this off (Triton then refuses those launches as usual).
"""

import functools
import os


def _amd_only_option_names():
    try:
        from triton.backends.amd.compiler import HIPOptions
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:  # a Triton without one of the two backends: nothing to translate between
        return frozenset()
    return frozenset(HIPOptions.__dataclass_fields__) - frozenset(CUDAOptions.__dataclass_fields__)


AMD_ONLY_OPTIONS = _amd_only_option_names()


@functools.cache
def _active_backend():
    from triton.runtime import driver

    return driver.active.get_current_target().backend


def install():
    """Wraps JITFunction.run once per process (idempotent)."""
    if not AMD_ONLY_OPTIONS or os.environ.get("APERTURE_IRIS_KEEP_AMD_OPTIONS") == "1":
        return
    from triton.runtime.jit import JITFunction

    if getattr(JITFunction.run, "_aperture_iris_drops_amd_options", False):
        return
    original = JITFunction.run

    @functools.wraps(original)
    def run(self, *args, grid, warmup, **kwargs):
        if not AMD_ONLY_OPTIONS.isdisjoint(kwargs) and _active_backend() != "hip":
            kwargs = {k: v for k, v in kwargs.items() if k not in AMD_ONLY_OPTIONS or k in self.arg_names}
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    run._aperture_iris_drops_amd_options = True
    JITFunction.run = run
