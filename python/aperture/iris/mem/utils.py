"""``iris.mem.utils``: Iris's device intrinsics for time and placement, at the path Iris's newest
tree gives them. The same functions as aperture.iris's own: ``read_realtime`` (%globaltimer, ns),
``get_cu_id`` (the SM); ``get_xcc_id`` and ``wait_cnt`` are AMD-only and refused at compile time."""

from .._device import get_cu_id, get_xcc_id, read_realtime, wait_cnt  # noqa: F401
