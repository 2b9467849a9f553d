"""``iris.mem``: where Iris's newest tree keeps its device side (``iris.mem.triton``)."""
