"""Iris's optional copy engine: the constructor's switch (``copy_engine="sdma"`` in one spelling,
``enable_copy_engine=True`` or ``IRIS_ENABLE_COPY_ENGINE`` in the other) and what the host's SDMA
methods say while it is off.

On AMD GPUs the switch sets up SDMA queues through AMD's rocm-xio (``pip install iris[sdma]``).
NVIDIA machines have neither, so here the copy engine is always off: asking for it fails before
the heap is made, with the ImportError Iris raises where rocm-xio is missing, and the host's SDMA
methods raise the RuntimeError Iris raises while it is off. Both name what to use instead.
"""

import os

import aperture

from . import _amd
from ._errors import IrisTypeError, IrisValueError

ENV = "IRIS_ENABLE_COPY_ENGINE"
_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"0", "false", "no", "off"})
_AUTO = frozenset({"", "auto"})


class CopyEngineUnavailable(aperture.Error, ImportError):
    """The copy engine was asked for: AMD-only (Iris raises ImportError where rocm-xio is missing)."""


def _parse_copy_engine_env(value):
    """``IRIS_ENABLE_COPY_ENGINE``'s value: True (1/true/yes/on), False (0/false/no/off) or None
    (empty or "auto": decided by whether the copy engine can be had), any case, spaces ignored."""
    word = value.strip().lower()
    if word in _ON:
        return True
    if word in _OFF:
        return False
    if word in _AUTO:
        return None
    raise IrisValueError(
        f"aperture: iris: {ENV}={value!r} is not understood: use 1/true/yes/on, 0/false/no/off, or auto "
        "(or leave it unset)", code=aperture.ErrorCode.invalid_argument)


def _resolve_enable_copy_engine(enable_copy_engine=None):
    """Whether the copy engine is asked for: the argument when given (a bool), else the environment,
    else "auto", which is off here (it needs AMD's rocm-xio, which NVIDIA machines lack)."""
    if enable_copy_engine is not None:
        if not isinstance(enable_copy_engine, bool):
            raise IrisTypeError(
                f"aperture: iris: enable_copy_engine must be True, False or None, not "
                f"{type(enable_copy_engine).__name__} {enable_copy_engine!r}", code=aperture.ErrorCode.invalid_argument)
        return enable_copy_engine
    asked = _parse_copy_engine_env(os.environ.get(ENV, ""))
    return bool(asked)


def check_off(copy_engine=None, enable_copy_engine=None):
    """The constructor's check, before anything collective: returns when the copy engine is off
    (what every NVIDIA job gets), raises when a spelling asks for it or names something else."""
    if copy_engine is not None and copy_engine != "sdma":
        raise IrisValueError(
            f"aperture: iris: copy_engine={copy_engine!r} is not a copy engine: Iris knows None (off) and "
            "\"sdma\" (AMD only)", code=aperture.ErrorCode.invalid_argument)
    asked = _resolve_enable_copy_engine(enable_copy_engine)
    if copy_engine == "sdma" or asked:
        how = 'copy_engine="sdma"' if copy_engine == "sdma" else (
            "enable_copy_engine=True" if enable_copy_engine else f"{ENV}={os.environ.get(ENV, '')!r}")
        kind, instead = _amd.AMD_ONLY["sdma"]
        raise CopyEngineUnavailable(
            f"aperture: iris: {how} asks for the copy engine, which is AMD-only: {kind}, set up through "
            f"AMD's rocm-xio (pip install iris[sdma]), which NVIDIA GPUs cannot use. Leave the copy engine "
            f"off (the default) and use {instead}.", code=aperture.ErrorCode.unavailable)


def refuse_while_off(what):
    """What a host SDMA method (put, put_tile, put_tiles, quiet) raises: the copy engine is off."""
    _kind, instead = _amd.AMD_ONLY["sdma"]
    raise aperture.Error(
        f"aperture: iris: {what} is a host-issued SDMA transfer, and the copy engine is disabled: it is "
        f"AMD-only (Iris enables it with copy_engine=\"sdma\" or enable_copy_engine=True on AMD GPUs). On "
        f"NVIDIA GPUs use {instead}.", code=aperture.ErrorCode.unavailable)
