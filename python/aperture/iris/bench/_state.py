"""``State``: what a benchmark function is handed for one point of its sweep.

The function body is the untimed setup of that point; through the state it reads the point's
axis values, declares what a call moves or computes, and hands over the call to time.
"""

import numbers

from ._errors import IrisTypeError, refuse


class SkipCombination(Exception):
    """Raised by State.skip: the runner records the point as skipped and goes on."""

    def __init__(self, reason=""):
        super().__init__(reason)
        self.reason = reason


def _count(what, n, least):
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        refuse(f"{what} takes an int, got {n!r}", IrisTypeError)
    if n < least:
        refuse(f"{what} must be >= {least}, got {n}")
    return int(n)


def _amount(what, n):
    if isinstance(n, bool) or not isinstance(n, numbers.Real):
        refuse(f"{what} takes a number, got {n!r}", IrisTypeError)
    if n < 0:
        refuse(f"{what} must be >= 0, got {n}")
    return n


class State:
    """One sweep point: ``state["M"]``, ``state.get(name, default)``, ``set_bytes``, ``set_flops``,
    ``add_counter``, ``set_warmup``, ``set_repeat``, ``exec(fn, preamble_fn=None)``, ``skip(reason)``."""

    def __init__(self, params, n_warmup, n_repeat):
        self._params = dict(params)
        self._n_warmup = _count("n_warmup", n_warmup, 0)
        self._n_repeat = _count("n_repeat", n_repeat, 1)
        self._bytes = None
        self._flops = None
        self._counters = {}
        self._timed = None
        self._preamble = None

    # -- the point's axis values --
    def __getitem__(self, name):
        try:
            return self._params[name]
        except KeyError:
            raise KeyError(f"iris.bench: this benchmark has no axis {name!r}; its axes are "
                           f"{', '.join(self._params) or '(none)'}") from None

    def get(self, name, default=None):
        return self._params.get(name, default)

    # -- what one call does, for the derived columns --
    def set_bytes(self, n):
        """Bytes one call moves: the results report n / time as bandwidth (GB/s, 1e9 bytes)."""
        self._bytes = _amount("set_bytes", n)

    def set_flops(self, n):
        """Floating-point operations of one call: the results report TFLOPS."""
        self._flops = _amount("set_flops", n)

    def add_counter(self, name, value):
        """An extra column ``name`` in the results, with ``value`` for this point."""
        if not isinstance(name, str) or not name:
            refuse(f"add_counter: the name must be a non-empty str, got {name!r}", IrisTypeError)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            refuse(f"add_counter({name!r}): the value must be a number, got {value!r}", IrisTypeError)
        self._counters[name] = float(value)

    # -- how often it runs --
    def set_warmup(self, n):
        """Untimed calls before the timed ones, for this point (default --n_warmup, 25)."""
        self._n_warmup = _count("set_warmup", n, 0)

    def set_repeat(self, n):
        """Timed calls, for this point (default --n_repeat, 100)."""
        self._n_repeat = _count("set_repeat", n, 1)

    # -- the call itself --
    def exec(self, fn, *, preamble_fn=None):
        """Hands over ``fn`` to time; it is not called here. After the benchmark function returns,
        the runner calls it once, then n_warmup times untimed, then n_repeat times timed, with
        ``preamble_fn`` (if given) before every call and outside the timed region."""
        if not callable(fn):
            refuse(f"exec takes a callable, got {fn!r}", IrisTypeError)
        if preamble_fn is not None and not callable(preamble_fn):
            refuse(f"exec: preamble_fn must be callable, got {preamble_fn!r}", IrisTypeError)
        self._timed = fn
        if preamble_fn is not None:
            self._preamble = preamble_fn

    def skip(self, reason=""):
        """Skips this point: it shows as ``(skipped) reason`` in the results. Does not return."""
        raise SkipCombination(str(reason))

    def __repr__(self):
        return f"State({self._params!r})"
