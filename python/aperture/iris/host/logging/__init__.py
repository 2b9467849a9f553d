"""``iris.host.logging``: Iris's logger and levels (aperture.iris.logging's)."""

from ...logging import DEBUG, ERROR, INFO, WARNING, logger, set_logger_level
from . import logging  # noqa: F401  (iris.host.logging.logging, Iris's module path)

__all__ = ["DEBUG", "ERROR", "INFO", "WARNING", "logger", "set_logger_level"]
