"""aperture.iris: Iris programs on aperture, unmodified (``python -m aperture.iris prog.py``) or with
``import aperture.iris as iris``.

Mirrors Iris's public module tree: ``iris.iris(heap_size, allocator_type=...)`` and class
``Iris`` (iris.iris), the device functions, ``DeviceContext``, ``iris.ccl`` (Config, every
collective, p2p, the fused ops), ``iris.ops`` (the fused GEMM + collective operations, also
``ctx.ops``), ``iris.tensor_creation``, the logging names, ``iris.do_bench``,
``iris.experimental``, ``iris.tracing`` (``ctx.tracing``, ``TraceEvent``), ``iris.bench`` and the
tile types kernels build (``iris.Tile``, ``iris.make_tensor_view`` ..., also ``iris.x``'s). AMD-only names
(gluon, SDMA and its device helpers, triggered copies, rocSHMEM, dmabuf, XCC, hip) raise one
aperture.Error each naming the NVIDIA equivalent. docs/IRIS.md lists every name.
"""

from . import _amd, _launch_options, ccl, experimental, ops, tensor_creation, tracing
from ._device import *  # noqa: F401,F403  (the device functions)
from .iris import Iris, iris
from ._tile import AllReduceConfig, TensorView, Tile, TileView, make_tensor_view
from .logging import DEBUG, ERROR, INFO, WARNING, logger, set_logger_level
from .tensor_utils import CUDAArrayInterface, tensor_from_ptr
from .tracing import TraceEvent, kernel_artifacts  # the latter reads IRIS_KERNEL_ARTIFACTS_DIR, as Iris's import does
from .util import do_bench, get_device_id_for_rank, is_simulation_env, parse_bool_env

from . import bench  # eager, as in Iris's newest package

from . import gluon, hip  # AMD-only: importable, every name in them refuses (aperture.iris._amd)

Iris.CCL = ccl.CCL  # Iris nests ctx.ccl's class in Iris (its docs name iris.iris.Iris.CCL.all_to_all)

_launch_options.install()
if is_simulation_env():
    from .util import _wrap_set_device_on_simulators

    _wrap_set_device_on_simulators()

# The version of Iris whose API this package mirrors (iris/__version__.py on Iris's main branch).
__version__ = "0.1.0"


def __getattr__(name):
    # The device side's names (aperture.iris._device_context), imported when first asked for.
    if name in ("DeviceContext", "Context", "TritonContext"):  # TritonContext: Iris's newest name
        from ._device_context import DeviceContext

        return DeviceContext
    # Subpackages a program may reach as attributes without importing them (Iris's package imports
    # iris.mem, for one): loaded when first asked for, so `import iris` stays light.
    if name in ("mem", "x", "host", "device", "context", "compile", "distributed", "triggered", "concurrent"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    if name in _amd.SDMA_DEVICE_HELPERS:
        _amd.refuse("sdma_device", f"iris.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Iris", "iris", "DeviceContext", "Context", "TritonContext", "translate", "load", "store", "get", "put", "copy", "atomic_add",
    "atomic_sub", "atomic_and", "atomic_or", "atomic_xor", "atomic_min", "atomic_max", "atomic_xchg", "atomic_cas",
    "do_bench", "tensor_creation", "ccl", "ops", "experimental", "hip", "set_logger_level", "logger", "DEBUG", "INFO",
    "WARNING", "ERROR", "get_device_id_for_rank", "is_simulation_env", "parse_bool_env", "CUDAArrayInterface",
    "tensor_from_ptr", "tracing", "TraceEvent", "Tile", "TileView", "TensorView", "AllReduceConfig", "make_tensor_view",
    "bench",
]
