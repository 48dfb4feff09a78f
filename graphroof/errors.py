"""One exceptions module for graphroof (networkx / coverage style).

Every expected failure derives from :class:`GraphroofError`; the CLI turns those into a one-line message
and exit code 1.  Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

__all__ = [
    "GraphroofError",
    "InputError",
    "FrontendError",
    "UnsupportedOpError",
    "RuleError",
    "UnboundDimError",
    "HardwareProfileError",
    "ReportError",
    "GraphroofWarning",
]


class GraphroofError(Exception):
    """Base class of every error graphroof raises on purpose."""


class InputError(GraphroofError):
    """A user-supplied value (file, flag, quantity) is malformed."""


class FrontendError(GraphroofError):
    """A model could not be loaded or traced into an OpGraph."""


class UnsupportedOpError(GraphroofError):
    """``strict=True`` and some ops have no counting rule."""

    def __init__(self, message: str, unknown: dict[str, int] | None = None):
        super().__init__(message)
        self.unknown = dict(unknown or {})


class RuleError(GraphroofError):
    """A counting rule failed on a node; the message names the node, op, shapes and scope."""


class UnboundDimError(GraphroofError):
    """A symbolic dimension (``"seq"``, ``"batch"``) has no value when a number is needed."""

    def __init__(self, dim: str, hint: str = ""):
        self.dim = dim
        msg = f"dimension {dim!r} is unbound"
        msg += f"; {hint}" if hint else "; bind it with --dim NAME=VALUE (CLI) or dims={...} (API)"
        super().__init__(msg)


class HardwareProfileError(GraphroofError):
    """A hardware profile is unknown or malformed; the message names the file and field."""


class ReportError(GraphroofError):
    """A report could not be rendered or written."""


class GraphroofWarning(UserWarning):
    """Warnings graphroof emits (unknown ops, estimated counts)."""
