"""``iris.device.sdma_utils``: AMD's SDMA copy-engine helpers. Importing succeeds, as it does for a
program that uses them only on its AMD path; any name in it raises the one AMD-only error, but for
``sdma_ep``, which Iris takes from rocm-xio and leaves None where rocm-xio is not installed."""

from .. import _amd

sdma_ep = None

__getattr__ = _amd.module_getattr("sdma", "iris.device.sdma_utils")
