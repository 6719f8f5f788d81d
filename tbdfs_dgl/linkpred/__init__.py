"""Temporal link prediction (the package's trainer); see :mod:`.trainer`."""
from .trainer import *  # noqa: F401,F403
from .trainer import __all__, _read_checkpoint  # noqa: F401
