"""One exceptions module for graphroof (networkx / coverage style).

Every expected failure derives from :class:`GraphroofError`; the CLI turns those into a one-line message
and exit code 1.  Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import re as _re

__all__ = [
    "GraphroofError",
    "InputError",
    "FrontendError",
    "UnsupportedOpError",
    "RuleError",
    "CostError",
    "UnboundDimError",
    "HardwareProfileError",
    "ReportError",
    "GraphroofWarning",
    "sanitize_terminal",
    "csv_safe",
]

_CONTROL = _re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def sanitize_terminal(s: object) -> str:
    r"""*s* safe to print: control characters (ESC of terminal escape sequences, CR, BEL, bidi overrides) become
    ``\xNN`` / ``\uNNNN`` text, bytes are decoded as UTF-8 with invalid bytes escaped.

    >>> sanitize_terminal("a\x1b[31mred\x07")
    'a\\x1b[31mred\\x07'
    """
    if isinstance(s, (bytes, bytearray)):
        s = bytes(s).decode("utf-8", errors="backslashreplace")
    text = str(s)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", text)


def csv_safe(s: object) -> str:
    """A CSV cell that a spreadsheet will not run as a formula (``=``, ``+``, ``-``, ``@``, tab, CR first: a
    leading ``'`` is added, OWASP's rule); numbers such as ``-1.5`` stay as they are.

    >>> csv_safe("=HYPERLINK(1)"), csv_safe("-1.5"), csv_safe("layer.0")
    ("'=HYPERLINK(1)", '-1.5', 'layer.0')
    """
    text = sanitize_terminal(s)
    if text and text[0] in "=+-@\t\r":
        try:
            float(text)
            return text
        except ValueError:
            return "'" + text
    return text


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


class CostError(RuleError, ValueError):
    """A cost is negative, not finite or beyond any real model (a dim or trip count in the input is wrong)."""


class UnboundDimError(GraphroofError):
    """A symbolic dimension (``"seq"``, ``"batch"``) has no value when a number is needed."""

    def __init__(self, dim: str, hint: str = "", where: str = ""):
        self.dim = dim
        msg = f"dimension {dim!r} is unbound"
        msg += f"; {hint}" if hint else "; bind it with --dim NAME=VALUE (CLI) or dims={...} (API)"
        super().__init__(f"{where}: {msg}" if where else msg)


class HardwareProfileError(GraphroofError):
    """A hardware profile is unknown or malformed; the message names the file and field."""


class ReportError(GraphroofError):
    """A report could not be rendered or written."""


class GraphroofWarning(UserWarning):
    """Warnings graphroof emits (unknown ops, estimated counts)."""


def warn(message: str, category: type[Warning] = GraphroofWarning) -> None:
    """Emit *message* attributed to the caller's code: the first stack frame outside the graphroof package
    (so ``python -W error`` and warning filters point at the user's line, not graphroof's)."""
    import os
    import sys
    import types
    import warnings

    pkg = os.path.dirname(os.path.abspath(__file__)) + os.sep
    level = 2  # stacklevel 2 = our caller
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(pkg):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
