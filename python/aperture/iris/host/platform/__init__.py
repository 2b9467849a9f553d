"""``iris.host.platform``: the newest Iris's platform helpers (``utils``)."""
