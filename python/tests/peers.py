"""Reading another rank's copy of host memory from a test: through the map's checked translation."""

import ctypes

import numpy as np

_CTYPES = {"int64": ctypes.c_int64, "int32": ctypes.c_int32, "float32": ctypes.c_float, "float64": ctypes.c_double}


def peer_array(m, tensor, peer, dtype="int64"):
    """Rank `peer`'s copy of host `tensor` (contiguous), as a numpy array over that memory."""
    n = tensor.numel() if hasattr(tensor, "numel") else tensor.size
    address = m.translate(tensor, peer)
    pointer = ctypes.cast(address, ctypes.POINTER(_CTYPES[dtype]))
    return np.ctypeslib.as_array(pointer, shape=(n,)) if n else np.empty(0, dtype=dtype)
