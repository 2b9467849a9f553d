"""CPU rehearsal of Iris's own tests (scripts/iris-upstream.sh on a machine without a GPU): not evidence.

Iris's tests and examples build their reference tensors with ``device="cuda"``, call
``torch.cuda.synchronize()`` and start torch.distributed on NCCL. Where there is no GPU, this module
(on PYTHONPATH only when scripts/iris-upstream.sh finds no GPU and APERTURE_IRIS_CPU_REHEARSAL=1)
makes those CUDA requests mean the CPU, so the tests' own assertions run against aperture.iris's host
heap with Triton's interpreter: a rehearsal that finds parity gaps before the GPU run. It changes
nothing where a GPU exists, and aperture.iris itself never relies on it.

Most of Iris's runner-form tests ask for an 8 GiB heap per rank (``iris.iris(2**33)``) and use at
most a few hundred MiB of it; a host heap that size is touched in full (half a minute each, 8 GiB
of this machine's memory per rank). With APERTURE_IRIS_CPU_REHEARSAL_HEAP=BYTES a larger request
gets BYTES instead, said on stderr; on a GPU the tests get what they ask for.
"""

import os


def _install():
    import torch
    from torch.overrides import TorchFunctionMode

    if torch.cuda.is_available():
        return

    def to_cpu(value):
        if isinstance(value, torch.device) and value.type == "cuda":
            return torch.device("cpu")
        if isinstance(value, str) and value.split(":")[0] == "cuda":
            return "cpu"
        return value

    class CudaMeansCpu(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if "device" in kwargs:
                kwargs["device"] = to_cpu(kwargs["device"])
            name = getattr(func, "__name__", "")
            if name == "cuda":  # tensor.cuda(): stays where it is
                return args[0]
            if name == "to" and len(args) > 1:
                args = (args[0], to_cpu(args[1])) + tuple(args[2:])
            return func(*args, **kwargs)

    CudaMeansCpu().__enter__()  # for the life of the process
    set_default_device = torch.set_default_device
    torch.set_default_device = lambda device: set_default_device(to_cpu(device))
    torch.cuda.synchronize = lambda device=None: None
    torch.cuda.set_device = lambda device: None
    torch.cuda.current_device = lambda: 0

    import torch.distributed as dist

    real_init = dist.init_process_group

    def init_process_group(backend=None, *args, **kwargs):
        if backend is not None and str(backend).lower() == "nccl":
            backend = "gloo"
        kwargs.pop("device_id", None)
        return real_init(backend, *args, **kwargs)

    dist.init_process_group = init_process_group


def _after_import(name, patch):
    """Calls patch(module) once the module ``name`` has loaded (no import of it here)."""
    import importlib.abc
    import importlib.machinery
    import sys

    class Loader(importlib.abc.Loader):
        def __init__(self, inner):
            self._inner = inner

        def create_module(self, spec):
            return self._inner.create_module(spec)

        def exec_module(self, module):
            self._inner.exec_module(module)
            patch(module)

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            if fullname != name:
                return None
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is not None and spec.loader is not None:
                spec.loader = Loader(spec.loader)
            return spec

    sys.meta_path.insert(0, Finder())


def _cap_heap(limit):
    """aperture.iris.Iris(heap_size > limit) gets limit bytes: patched in as aperture.iris.iris loads."""
    import sys

    def patch(module):
        original = module.Iris.__init__

        def __init__(self, heap_size=1 << 30, *args, **kwargs):
            if heap_size > limit:
                print(f"iris-cpu-rehearsal: a heap of {heap_size} bytes asked for, {limit} given (the tests "
                      "use less; on a GPU they get what they ask)", file=sys.stderr)
                heap_size = limit
            original(self, heap_size, *args, **kwargs)

        module.Iris.__init__ = __init__

    _after_import("aperture.iris.iris", patch)


def _interpreter_takes_one_element_indices():
    """Triton 3.6's interpreter holds a kernel's scalar arguments as one-element arrays and makes an
    index of them with int(), which NumPy 2.4 refuses for arrays that are not 0-d: a kernel loop
    over a runtime bound (Iris's ``for tile_id in range(pid, total_tiles, NUM_SMS)``) fails before
    it starts. Compiled kernels are unaffected; the rehearsal converts such an array's one value."""

    def patch(interpreter):
        original = interpreter._patch_lang_tensor

        def patch_lang_tensor(tensor, scope):
            original(tensor, scope)
            scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

        interpreter._patch_lang_tensor = patch_lang_tensor

    _after_import("triton.runtime.interpreter", patch)


if os.environ.get("APERTURE_IRIS_CPU_REHEARSAL") == "1":
    _install()
    _interpreter_takes_one_element_indices()
    if os.environ.get("APERTURE_IRIS_CPU_REHEARSAL_HEAP"):
        _cap_heap(int(os.environ["APERTURE_IRIS_CPU_REHEARSAL_HEAP"]))
