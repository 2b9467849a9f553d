"""``iris.mem.triton.triggered``: the device side of Iris's triggered SDMA copies (``TriggeredView``,
``publish``, ``arrived`` ...), AMD-only: its gates are opened for copy engines, and its wait on
outstanding memory operations compiles only for AMD GPUs. The import succeeds; any name in it
raises aperture.Error saying so and what an NVIDIA program uses instead (aperture.iris._amd)."""

from ..._amd import module_getattr

__getattr__ = module_getattr("triggered_copy", "iris.mem.triton.triggered")
