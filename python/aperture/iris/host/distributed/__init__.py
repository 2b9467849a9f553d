"""``iris.host.distributed``: the newest Iris's package of host-side distributed helpers. Like Iris's,
it exports nothing itself; ``iris.host.distributed.helpers`` holds the functions (host helpers
over torch.distributed, and the device barrier), ``iris.host.distributed.topology`` the topology
discovery (ranks, nodes, GPU links, fabric domains). Iris's ``fd_passing`` (file-descriptor
passing for AMD's allocators) is not provided (docs/IRIS.md)."""
