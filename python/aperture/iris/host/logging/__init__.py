"""``iris.host.logging``: Iris's logger and levels (aperture.iris.logging's)."""

from ...logging import DEBUG, ERROR, INFO, WARNING, logger, set_logger_level

__all__ = ["DEBUG", "ERROR", "INFO", "WARNING", "logger", "set_logger_level"]
