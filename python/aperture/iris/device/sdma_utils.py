"""``iris.device.sdma_utils``: AMD's SDMA copy-engine helpers. Importing succeeds, as it does for a
program that uses them only on its AMD path; any name in it raises the one AMD-only error."""

from .. import _amd

__getattr__ = _amd.module_getattr("sdma", "iris.device.sdma_utils")
