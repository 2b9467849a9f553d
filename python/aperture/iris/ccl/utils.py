"""``iris.ccl.ReduceOp`` and the mapping of every spelling of a reduction to aperture's names."""

from enum import Enum

import aperture


class ReduceOp(Enum):
    SUM = "sum"
    PRODUCT = "prod"
    MIN = "min"
    MAX = "max"
    AVG = "avg"


def op_name(op, call):
    """"sum", "prod", "min", "max" or "avg" for None (sum), a ReduceOp, torch.distributed's ReduceOp or a name."""
    if op is None:
        return "sum"
    if isinstance(op, ReduceOp):
        return op.value
    text = str(getattr(op, "name", op)).rsplit(".", 1)[-1].lower()
    text = {"product": "prod", "average": "avg"}.get(text, text)
    if text in ("sum", "prod", "min", "max", "avg"):
        return text
    raise aperture.Error(f"aperture: iris.ccl.{call}: reduction {op!r} is not supported; give ReduceOp.SUM, PRODUCT, "
                         "MIN, MAX or AVG", code=aperture.ErrorCode.invalid_argument)
