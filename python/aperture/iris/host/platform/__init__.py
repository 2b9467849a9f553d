"""``iris.host.platform``: the newest Iris's platform helpers (``utils``), and ``hip``, which Iris's
package imports from here: AMD-only, importable, every name in it refuses (aperture.iris._amd)."""

from ... import hip  # noqa: F401
