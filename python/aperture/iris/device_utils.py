"""``iris.device_utils``: where Iris kept its device intrinsics before ``iris.mem.utils``."""

from .mem.utils import get_cu_id, get_xcc_id, read_realtime, wait_cnt  # noqa: F401
