"""``iris.triggered``: Iris's triggered SDMA copies (plans whose copies AMD's copy engines start when
a kernel opens a gate), AMD-only. The import succeeds; any name in it raises aperture.Error saying
it is AMD-only and what an NVIDIA program uses instead (aperture.iris._amd)."""

from ._amd import module_getattr

__getattr__ = module_getattr("triggered_copy", "iris.triggered")
