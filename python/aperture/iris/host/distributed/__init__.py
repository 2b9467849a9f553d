"""``iris.host.distributed``: the newest Iris's package of host-side distributed helpers. Like Iris's,
it exports nothing itself; ``iris.host.distributed.helpers`` holds the functions (host helpers
over torch.distributed, and the device barrier). Iris's other modules here (``topology``,
``fd_passing``: its fabric discovery and file-descriptor passing for AMD's allocators) are not
provided (docs/IRIS.md)."""
