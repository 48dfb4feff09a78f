"""Standard output for the CLI: a failed write (a full disk, an I/O error) is a one-line error, not a traceback.

:func:`guarded` wraps ``sys.stdout`` while a command runs, so every ``print`` of every sub-command gets the same
treatment as :func:`graphroof.report.write_stdout`; a closed pipe (``graphroof ... | head``) stays a
:class:`BrokenPipeError`, which the CLI turns into a quiet exit 0.  :func:`discard_unwritten` runs before the
interpreter exits, so that output that could not be written is not retried (and reported) at exit.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO, cast

from ..errors import ReportError

__all__ = ["GuardedStream", "guarded", "discard_unwritten"]


def _failed(e: OSError) -> ReportError:
    return ReportError(f"cannot write to standard output: {e.strerror or e}; free space where it goes or write to "
                       f"a file with -o")


class GuardedStream:
    """*stream* whose ``write`` and ``flush`` raise :class:`ReportError` on an OSError other than a closed pipe;
    everything else (``isatty``, ``encoding``, ``fileno`` ...) is the stream's own.  ``buffer`` is guarded too."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, data: Any) -> Any:
        try:
            return self._stream.write(data)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise _failed(e) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise _failed(e) from None

    @property
    def buffer(self) -> GuardedStream:
        return GuardedStream(self._stream.buffer)

    @property
    def wrapped(self) -> Any:
        """The stream this one guards."""
        return self._stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guarded(stream: Any) -> TextIO:
    """*stream* wrapped in a :class:`GuardedStream` (once: a guarded stream comes back as it is), typed as the
    text stream it stands in for."""
    return cast(TextIO, stream if isinstance(stream, GuardedStream) else GuardedStream(stream))


def discard_unwritten() -> None:
    """Flush stdout; if that fails, point its descriptor at the null device so the interpreter's own flush at exit
    does not print a second error (or a traceback) for bytes that cannot be written anyway."""
    try:
        sys.stdout.flush()
        return
    except OSError:
        pass
    try:
        fd = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError, AttributeError):
        return
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)
