"""``iris.CUDAArrayInterface`` and ``iris.tensor_from_ptr``: a torch tensor over memory given by its
address, as Iris's newest top level exports them (docs/IRIS.md, "Newer Iris versions").

The tensor does not own the memory: whoever allocated it keeps it alive while the tensor is used.
"""

import ctypes

import numpy
import torch

import aperture


class CUDAArrayInterface:
    """``size_bytes`` bytes of device memory at ``ptr``, described by ``__cuda_array_interface__``
    (version 3, one dimension of uint8), so ``torch.as_tensor(x, device="cuda")`` wraps them."""

    def __init__(self, ptr, size_bytes):
        self.ptr = int(ptr)
        self.size_bytes = int(size_bytes)

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.size_bytes,), "typestr": "|u1", "data": (self.ptr, False), "version": 3}


def tensor_from_ptr(ptr, size_bytes, dtype=torch.float32, device="cuda", shape=None):
    """A tensor of ``dtype`` over the ``size_bytes`` bytes at ``ptr`` (no copy): one dimension, or
    ``shape``. ``device="cuda"`` (or "cuda:N") for device memory; ``"cpu"`` for host memory (an
    aperture extension: Iris's heaps are device memory only, aperture's shm heap is not)."""
    size_bytes = int(size_bytes)
    element = torch.empty((), dtype=dtype).element_size()
    if size_bytes < 0 or size_bytes % element:
        raise aperture.Error(f"tensor_from_ptr: size_bytes {size_bytes} is not a whole number of {dtype} elements "
                             f"({element} bytes each)", code=aperture.ErrorCode.invalid_argument)
    if int(ptr) == 0 and size_bytes:
        raise aperture.Error("tensor_from_ptr: ptr is 0 (no memory there); pass the address of the allocation",
                             code=aperture.ErrorCode.invalid_argument)
    where = torch.device(device)
    if where.type == "cuda":
        raw = torch.as_tensor(CUDAArrayInterface(ptr, size_bytes), device=where)
    elif where.type == "cpu":
        buffer = (ctypes.c_uint8 * size_bytes).from_address(int(ptr)) if size_bytes else bytearray()
        raw = torch.from_numpy(numpy.frombuffer(buffer, dtype=numpy.uint8))
    else:
        raise aperture.Error(f"tensor_from_ptr: device {device!r} is neither cuda nor cpu",
                             code=aperture.ErrorCode.invalid_argument)
    typed = raw.view(dtype)
    if shape is None:
        return typed
    try:
        return typed.view(tuple(shape))
    except RuntimeError as e:
        raise aperture.Error(f"tensor_from_ptr: shape {tuple(shape)} does not hold {typed.numel()} elements "
                             f"({size_bytes} bytes of {dtype})", code=aperture.ErrorCode.invalid_argument) from e
