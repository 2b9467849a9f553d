"""``iris.host``: where the newest Iris keeps its host side (``iris.host.iris``,
``iris.host.platform.utils``, ``iris.host.logging``, ``iris.host.tracing``,
``iris.host.memory.address_map`` and ``.tensors``, ``iris.host.distributed.helpers`` and
``.topology``), for programs that import those paths; each name is the aperture.iris object of the
same name (docs/IRIS.md, "Newer Iris versions"). Iris's internal host modules for AMD's allocators
(memory allocators, fd passing) are not provided."""
