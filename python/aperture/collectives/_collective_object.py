"""What the Python classes over a collective C++ object (Communicator, OverlappedGemm) share:
made from a team and the provider it allocates from, its rank and size, and close(), which is
collective and also runs on leaving a ``with`` block."""


class CollectiveObject:
    _core_class = None  # the nanobind class; each subclass names its own

    def __init__(self, team, provider):
        self._provider = provider
        self._core = type(self)._core_class(provider._core, team)

    rank = property(lambda self: self._core.rank)
    size = property(lambda self: self._core.size)
    provider = property(lambda self: self._provider)

    def close(self):
        self._core.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
