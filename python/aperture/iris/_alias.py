"""Makes ``import iris`` (and ``iris.ccl``, ``iris.iris``, ...) resolve to aperture.iris, on request only.

Installed by ``python -m aperture.iris prog.py`` (and so by ``aperture launch --iris``) and by the
``iris`` package in ``_shim/`` that those put first on PYTHONPATH for child processes (workers
that torch.multiprocessing spawns import ``iris`` afresh). Never silently over a real Iris: when
another ``iris`` package is importable, installing refuses unless APERTURE_IRIS_OVERRIDE=1.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

SHIM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_shim")
_PREFIX = "iris"
_TARGET = "aperture.iris"


def real_iris_location():
    """Where a real (non-aperture) ``iris`` package would import from, or None."""
    path = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != SHIM_DIR]
    spec = importlib.machinery.PathFinder.find_spec(_PREFIX, path)
    if spec is None:
        return None
    origin = spec.origin or (list(spec.submodule_search_locations or []) or [""])[0]
    return None if origin.startswith(SHIM_DIR) else origin


def check_no_real_iris():
    where = real_iris_location()
    if where and os.environ.get("APERTURE_IRIS_OVERRIDE") != "1":
        raise ImportError(
            f"aperture.iris: a real Iris is importable here ({where}); aperture will not shadow it silently. "
            "Uninstall it or take it off sys.path, or set APERTURE_IRIS_OVERRIDE=1 to run this program on "
            "aperture.iris instead")


def _alias_loaded_submodules(target, alias):
    """Registers every submodule of ``target`` already loaded under the ``alias`` path too. Imported
    through the finder instead, the import system would set the package's attribute of that name to
    the submodule: iris.iris (the function) or iris.x.gemm_all_gather (the kernel) would become
    modules once a program imports ``iris.x.gemm_all_gather``, as Iris's tests do."""
    for name, module in list(sys.modules.items()):
        if name.startswith(target + "."):
            sys.modules.setdefault(alias + name[len(target):], module)


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target):
        self._target = target

    def create_module(self, spec):
        module = importlib.import_module(self._target)  # the one module object: no second copy of any class
        _alias_loaded_submodules(self._target, spec.name)
        return module

    def exec_module(self, module):
        pass


class IrisAliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != _PREFIX and not fullname.startswith(_PREFIX + "."):
            return None
        aliased = _TARGET + fullname[len(_PREFIX):]
        if importlib.util.find_spec(aliased) is None:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(aliased))


def _without_gpu_set_device_is_a_no_op():
    # Iris programs call torch.cuda.set_device(local_rank) first thing. On a machine without a GPU
    # the heap is host memory and kernels run under Triton's interpreter (docs/IRIS.md), so the call
    # has nothing to select: it is skipped instead of failing. With a GPU nothing changes.
    import torch

    if torch.cuda.is_available() or getattr(torch.cuda.set_device, "_aperture_iris_no_gpu", False):
        return

    def set_device(device):
        return None

    set_device._aperture_iris_no_gpu = True
    torch.cuda.set_device = set_device


def install():
    """Idempotent. Raises ImportError if a real Iris is importable and no override is set."""
    if any(isinstance(f, IrisAliasFinder) for f in sys.meta_path):
        return
    check_no_real_iris()
    importlib.import_module(_TARGET)
    sys.modules.setdefault(_PREFIX, sys.modules[_TARGET])
    _alias_loaded_submodules(_TARGET, _PREFIX)
    sys.meta_path.insert(0, IrisAliasFinder())
    os.environ["APERTURE_IRIS"] = "1"
    _without_gpu_set_device_is_a_no_op()
    # Child Python processes import iris through the shim package: fresh interpreters find it on
    # PYTHONPATH; multiprocessing's spawned workers get this process's sys.path instead.
    if SHIM_DIR not in sys.path:
        sys.path.append(SHIM_DIR)
    parts = os.environ.get("PYTHONPATH", "").split(os.pathsep) if os.environ.get("PYTHONPATH") else []
    if SHIM_DIR not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([SHIM_DIR] + parts)
