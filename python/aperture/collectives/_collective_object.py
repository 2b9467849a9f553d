"""What the Python classes over a collective C++ object (Communicator, OverlappedGemm) share:
made from a team and the provider it allocates from, its rank and size, and close(), which is
collective and also runs on leaving a ``with`` block. One dropped without close() is torn down
later, at a collective point where every rank has dropped it (_dropped)."""

from .. import _core
from .._error import ErrorCode, fail
from . import _dropped


class CollectiveObject:
    _core_class = None  # the nanobind class; each subclass names its own

    def __init__(self, team, provider):
        name = type(self).__name__
        if not isinstance(team, _core.Team):
            fail(ErrorCode.invalid_argument, f"{name}(team, provider): team is a {type(team).__name__}; give an "
                 "aperture.Team (aperture.Team.from_env()) first and the provider second")
        if not hasattr(provider, "_core") or not isinstance(provider._core, _core.Provider):
            fail(ErrorCode.invalid_argument, f"{name}(team, provider): provider is a {type(provider).__name__}; give "
                 "an aperture provider (aperture.make_provider(name, team))")
        _dropped.agree_and_release(team)  # a collective point: what every rank has dropped goes first
        self._team = team
        self._serial = _dropped.next_serial(team)
        self._provider = provider
        self._core = type(self)._core_class(provider._core, team)
        _dropped.opened(team)

    rank = property(lambda self: self._core.rank)
    size = property(lambda self: self._core.size)
    provider = property(lambda self: self._provider)

    def close(self):
        if not self._core.closed:
            _dropped.agree_and_release(self._team)
            self._core.close()
            _dropped.torn_down(self._team)

    def __del__(self):
        core = getattr(self, "_core", None)  # None when making it failed
        if core is None or core.closed or _dropped.defer(self._team, self._serial, core):
            return
        core.close()
        _dropped.torn_down(self._team)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
