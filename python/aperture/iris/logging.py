"""Iris's logging names: ``iris.logger``, ``iris.set_logger_level``, ``iris.DEBUG`` ... ``iris.ERROR``.

The logger is named "iris" as Iris's is, so a program's ``logging.getLogger("iris")`` settings
apply; IRIS_LOG_LEVEL sets its starting level. Records that ``Iris.debug/info/...`` emit carry
``iris_rank`` and ``iris_num_ranks``, which IrisFormatter (the handler's) shows as ``[rank/num_ranks]``.
"""

import logging as _logging
import os as _os

DEBUG = _logging.DEBUG
INFO = _logging.INFO
WARNING = _logging.WARNING
ERROR = _logging.ERROR


class IrisFormatter(_logging.Formatter):
    """Iris's format: ``[Iris] message``, and ``[Iris] [rank/num_ranks] message`` for a record that
    carries ``iris_rank`` and ``iris_num_ranks``."""

    def format(self, record):
        rank = getattr(record, "iris_rank", None)
        num_ranks = getattr(record, "iris_num_ranks", None)
        where = "" if rank is None or num_ranks is None else f" [{rank}/{num_ranks}]"
        return f"[Iris]{where} {record.getMessage()}"


logger = _logging.getLogger("iris")
logger.setLevel(INFO)
_level_from_env = _os.environ.get("IRIS_LOG_LEVEL", "").upper()
if _level_from_env in ("DEBUG", "INFO", "WARNING", "ERROR"):
    logger.setLevel(getattr(_logging, _level_from_env))
if not logger.handlers:
    _handler = _logging.StreamHandler()
    _handler.setFormatter(IrisFormatter())
    logger.addHandler(_handler)


def set_logger_level(level):
    """Sets the "iris" logger's level (iris.DEBUG, iris.INFO, iris.WARNING, iris.ERROR or a name)."""
    logger.setLevel(level)


def _log_rank(level, msg, *args, rank=None, num_ranks=None):
    """Iris's newest helper: ``msg % args`` at ``level``, formatted only when the level is enabled,
    with ``[rank/num_ranks]`` when a rank is given."""
    if logger.isEnabledFor(level):
        record = _logging.LogRecord(logger.name, level, "", 0, msg, args, None)
        if rank is not None:
            record.iris_rank = rank
            record.iris_num_ranks = num_ranks
        logger.handle(record)


def log_with_rank(level, message, rank, num_ranks):
    _log_rank(level, "%s", message, rank=rank, num_ranks=num_ranks)


__all__ = ["logger", "set_logger_level", "IrisFormatter", "DEBUG", "INFO", "WARNING", "ERROR"]
