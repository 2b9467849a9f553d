"""``iris.host.logging.logging``: the module Iris's newest host code imports its logger from; the
same objects as aperture.iris.logging's."""

from ...logging import DEBUG, ERROR, INFO, WARNING, IrisFormatter, _log_rank, logger, set_logger_level

__all__ = ["DEBUG", "ERROR", "INFO", "WARNING", "IrisFormatter", "_log_rank", "logger", "set_logger_level"]
