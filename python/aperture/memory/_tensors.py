"""What the package needs to know of a torch tensor or a numpy array: where it lies, how far it
reaches, its element type and device; and how to make one over memory aperture owns.

torch is optional: without it, host memory comes as numpy arrays, and GPU memory is refused."""

import math

import numpy as np

from .. import _core
from .._error import ErrorCode, fail

try:
    import torch
except ImportError:  # numpy arrays only
    torch = None


def is_tensor(x):
    return torch is not None and isinstance(x, torch.Tensor)


def check_array(call, x, role="tensor"):
    if not (is_tensor(x) or isinstance(x, np.ndarray)):
        fail(ErrorCode.invalid_argument,
             f"{call}: {role} is a {type(x).__name__}, not a torch.Tensor or numpy.ndarray")


def root_of(x):
    """The object every view of x's memory keeps alive: the array aperture made (or x itself)."""
    if is_tensor(x):
        return x._base if x._base is not None else x
    while isinstance(x.base, np.ndarray):
        x = x.base
    return x


def address(x):
    return x.data_ptr() if is_tensor(x) else x.__array_interface__["data"][0]


def extent(x):
    """(first byte, bytes) that x's elements span, strides included."""
    start = address(x)
    if numel(x) == 0:
        return start, 0
    item = itemsize_of(x)
    if is_tensor(x):
        span = sum((n - 1) * s for n, s in zip(x.shape, x.stride()))
        return start, (span + 1) * item
    low = sum((n - 1) * s for n, s in zip(x.shape, x.strides) if s < 0)
    high = sum((n - 1) * s for n, s in zip(x.shape, x.strides) if s > 0)
    return start + low, high - low + item


def itemsize_of(x):
    return x.element_size() if is_tensor(x) else x.itemsize


def numel(x):
    return x.numel() if is_tensor(x) else x.size


def dtype_name(x):
    return str(x.dtype).replace("torch.", "") if is_tensor(x) else x.dtype.name


def device_index(x):
    """The CUDA device x lies on, or -1 for host memory."""
    if is_tensor(x) and x.device.type == "cuda":
        return x.device.index if x.device.index is not None else torch.cuda.current_device()
    return -1


def is_contiguous(x):
    return x.is_contiguous() if is_tensor(x) else x.flags["C_CONTIGUOUS"]


def describe(x):
    where = str(x.device) if is_tensor(x) else "cpu"
    kind = "torch.Tensor" if is_tensor(x) else "numpy.ndarray"
    return f"{kind} {dtype_name(x)} {tuple(x.shape)} on {where}"


def shape_tuple(shape):
    shape = (shape,) if isinstance(shape, int) else tuple(int(n) for n in shape)
    if any(n < 0 for n in shape):
        fail(ErrorCode.invalid_argument, f"shape {shape} has a negative extent")
    return shape


def wrap(addr, nbytes, owner, device, shape, dtype):
    """The memory [addr, addr + nbytes) as a tensor (or numpy array) of `shape` and `dtype`, on CUDA
    device `device` (-1: the CPU), holding `owner` alive."""
    if torch is None:
        if device >= 0:
            fail(ErrorCode.unavailable, "GPU memory comes as torch tensors, and torch is not installed: pip install torch")
        raw = _core.as_numpy(addr, nbytes, owner, -1)
        return raw.view(dtype).reshape(shape)
    raw = _core.as_torch(addr, nbytes, owner, device)
    return raw.view(dtype).view(shape)


def product(shape):
    return math.prod(shape)
