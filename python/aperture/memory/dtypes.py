"""Element types: what a tensor's dtype is to aperture.

``DataType`` is the C++ enum of the collectives' element types (aperture/collectives/types.h),
bound by the extension: its members are the list, so a type added in C++ appears here with no
edit. A dtype crosses into C++ as a member of it, never as a string. torch and numpy call
NCCL's e4m3 (finite, no infinity) ``float8_e4m3fn``; every other name is the C++ one.

    aperture.dtypes.NAMES                      # ("int8", "uint8", ..., "float8_e4m3fn", "float8_e5m2")
    aperture.dtypes.data_type(torch.bfloat16)  # DataType.bfloat16; None for a type collectives do not take
"""

import numpy as np

from .. import _core
from .._error import ErrorCode, fail
from ._tensors import torch

DataType = _core.DataType
ReduceOp = _core.ReduceOp

_PYTHON_NAME = {"float8_e4m3": "float8_e4m3fn"}  # the C++ name -> torch's and numpy's

#: The element types collectives take, by torch's (and numpy's) names, in the C++ list's order.
NAMES = tuple(_PYTHON_NAME.get(t.name, t.name) for t in DataType)
_BY_NAME = {_PYTHON_NAME.get(t.name, t.name): t for t in DataType}
_BY_DTYPE = {}  # torch.dtype or numpy dtype -> DataType (or None), filled as dtypes are first seen
REDUCE_OPS = tuple(op.name for op in ReduceOp)
_OPS = {op.name: op for op in ReduceOp}


def name_of(dtype):
    """torch's (or numpy's) name of a torch or numpy dtype: "bfloat16", "float8_e4m3fn"."""
    return str(dtype).replace("torch.", "") if torch is not None and isinstance(dtype, torch.dtype) else np.dtype(dtype).name


def data_type(dtype):
    """The DataType of a torch or numpy dtype, or None when collectives do not take it."""
    try:
        return _BY_DTYPE[dtype]
    except KeyError:
        found = _BY_DTYPE[dtype] = _BY_NAME.get(name_of(dtype))
        return found


def reduce_op(call, op):
    """The ReduceOp named `op` ("sum", "prod", "min", "max", "avg"); aperture.Error otherwise."""
    found = _OPS.get(op) if isinstance(op, str) else None
    if found is None:
        fail(ErrorCode.invalid_argument,
             f"{call}: op = \"{op}\" is not a reduction; use " + ", ".join(f'"{n}"' for n in REDUCE_OPS))
    return found


def resolve(dtype):
    """A torch dtype where torch is here (from a torch dtype, a numpy dtype or a name), else numpy's."""
    if torch is not None:
        if isinstance(dtype, torch.dtype):
            return dtype
        name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
        found = getattr(torch, name, None)
        if isinstance(found, torch.dtype):
            return found
        fail(ErrorCode.invalid_argument, f"dtype {dtype!r} is not a torch dtype")
    try:
        return np.dtype(dtype)
    except TypeError:
        fail(ErrorCode.invalid_argument, f"dtype {dtype!r} is not a numpy dtype (and torch is not installed)")


def itemsize(dtype):
    if torch is not None and isinstance(dtype, torch.dtype):
        return dtype.itemsize
    return np.dtype(dtype).itemsize
