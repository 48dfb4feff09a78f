"""Stage messages for long runs ("loading llama-2-7b…", "counting 1234 ops…") on stderr.

Shown only when stderr is a terminal and ``--quiet`` is off, so pipes, CI logs and tests stay clean.  One line
per stage with the time since the start; callers just call the object with a message.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress", "NULL"]


class Progress:
    """``progress("counting 1234 ops")`` prints ``graphroof: counting 1234 ops… (0.8 s)`` when enabled."""

    def __init__(self, quiet: bool = False, stream: TextIO | None = None, force: bool | None = None):
        self.stream = stream if stream is not None else sys.stderr
        if force is not None:
            self.enabled = force
        else:
            isatty = getattr(self.stream, "isatty", None)
            self.enabled = not quiet and bool(isatty and isatty())
        self.t0 = time.perf_counter()

    def __call__(self, message: str) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.t0
        print(f"graphroof: {message}… ({elapsed:.1f} s)", file=self.stream, flush=True)

    def done(self, what: str = "done") -> None:
        if self.enabled:
            print(f"graphroof: {what} in {time.perf_counter() - self.t0:.1f} s", file=self.stream, flush=True)


#: A progress sink that never prints (the API default).
NULL = Progress(force=False)
