"""``iris.host.iris``: the host class and its factory (aperture.iris.Iris, aperture.iris.iris)."""

from ..iris import Iris, iris

__all__ = ["Iris", "iris"]
