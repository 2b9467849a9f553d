"""``iris.ccl.autotune``: Iris's resolution of ``AUTOTUNE`` fields, on aperture.

Iris benchmarks candidate kernel parameters on a collective's first call. Those parameters do not
steer aperture's collectives (the Communicator picks its algorithm per size and team from its own
tuning), so a search would time the same call over and over: here every AUTOTUNE field takes the
field's default, at once and alike on every rank. ``IRIS_AUTOTUNE_VERBOSE=1`` says so once per
collective (rank 0); ``IRIS_AUTOTUNE`` and ``IRIS_AUTOTUNE_BUDGET`` change nothing.
"""

import os
import sys
from dataclasses import fields

from .config import AUTOTUNE, Config

_told = set()  # collectives IRIS_AUTOTUNE_VERBOSE has spoken of


def _default(name):
    return next(f.default for f in fields(Config) if f.name == name)


def resolve_config(collective, config, collective_fn=None, output_tensor=None, input_tensor=None, shmem=None,
                   **extra_kwargs):
    """A Config with no AUTOTUNE field for ``collective``: ``config`` itself when it has none,
    the defaults when it is None, else a copy with each AUTOTUNE field at its default (checked as
    any Config). The benchmarking arguments of Iris's signature are accepted and not used."""
    if config is None:
        resolved, chosen = Config(), []
    else:
        if not isinstance(config, Config):
            raise TypeError(f"iris.ccl.autotune.resolve_config: config must be an iris.ccl.Config or None, "
                            f"got {type(config).__name__}")
        chosen = config.get_autotune_fields()
        if not chosen:
            return config
        resolved = config.with_resolved(**{name: _default(name) for name in chosen})
    rank = shmem.get_rank() if shmem is not None and hasattr(shmem, "get_rank") else 0
    if os.environ.get("IRIS_AUTOTUNE_VERBOSE", "0") == "1" and rank == 0 and collective not in _told:
        _told.add(collective)
        what = ", ".join(chosen) if chosen else "every field"
        print(f"[aperture.iris autotune] {collective}: {what} at the default; aperture's Communicator tunes its own "
              "algorithm per size, so nothing is benchmarked", file=sys.stderr)
    return resolved


__all__ = ["AUTOTUNE", "resolve_config"]
