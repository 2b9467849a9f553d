"""``iris.x.core``: the tile types and index helpers (aperture.iris._tile's, every name of its
``__all__``)."""

from .._tile import *  # noqa: F401,F403
from .._tile import __all__  # noqa: F401
