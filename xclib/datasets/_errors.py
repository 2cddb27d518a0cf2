"""The three errors of :mod:`xclib.datasets`; every message names the file concerned."""
from __future__ import annotations

__all__ = ["DataNotFoundError", "ChecksumError", "DataFormatError"]


class DataNotFoundError(FileNotFoundError):
    """A data file is in none of the places looked, and could not be downloaded."""


class ChecksumError(OSError):
    """A data file's sha256 is not the one recorded for it."""


class DataFormatError(ValueError):
    """A data file is malformed; the message names the file and the line or header field."""
