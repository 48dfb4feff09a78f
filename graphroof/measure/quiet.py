"""Keep the profiler's native log lines (Kineto's ``STAGE:`` / ``ActivityProfilerController`` lines, written by
C++ straight to file descriptor 2) off the user's terminal, while every other stderr line still gets through."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

__all__ = ["filtered_native_stderr", "NOISE"]

#: Lines of native profiler chatter (dropped); everything else is written back to stderr.
NOISE = re.compile(r"STAGE:|ActivityProfiler|[Kk]ineto|CUPTI|libkineto")


@contextlib.contextmanager
def filtered_native_stderr(noise: re.Pattern = NOISE) -> Iterator[None]:
    """Redirect fd 2 to a temporary file inside the block; afterwards re-emit the lines that are not *noise*."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # no real stderr (captured by a test runner): nothing to do
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), fd)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, fd)
            os.close(saved)
            tmp.seek(0)
            kept = [ln for ln in tmp.read().decode("utf-8", "replace").splitlines() if not noise.search(ln)]
            if kept:
                sys.stderr.write("\n".join(kept) + "\n")
