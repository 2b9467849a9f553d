"""``iris.host.tracing.kernel_artifacts``: Iris's newest path of aperture.iris.tracing.kernel_artifacts.

The very module, not a copy: Iris's tests and programs set its globals (``_enabled``,
``_artifacts_dir``), which must reach ``iris_launch`` by either path."""

import sys

from ...tracing import kernel_artifacts

sys.modules[__name__] = kernel_artifacts  # the import system hands out what sys.modules holds
