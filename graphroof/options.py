"""One frozen value of the run-wide switches, passed explicitly through the entry points (``analyze``,
``llm.estimate``, ``sweep``, the frontends) instead of context variables or process-wide state.

Everything a user can set from the environment is listed here once (:data:`ENV`), with its meaning; the README's
"Environment" table is checked against it by a test.  Code reads an environment variable only through
:func:`env`, so a variable that is not listed here cannot be read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

__all__ = ["ENV", "Options", "env", "DEFAULT"]

#: Every environment variable graphroof reads, and what it does (the README's table says the same).
ENV: dict[str, str] = {
    "GRAPHROOF_CACHE": "off / 0 / no / false: never read or write the trace store (same as --no-cache; default on)",
    "GRAPHROOF_CACHE_DIR": "where the trace store lives (default $XDG_CACHE_HOME/graphroof, else ~/.cache/graphroof)",
    "GRAPHROOF_CACHE_MB": "size limit of the trace store in MB, least recently used entries pruned (default 2000)",
    "GRAPHROOF_INFER_MEM_GB": "memory budget of ONNX shape inference in its forked child (default: half the "
                              "available memory, at most 16 GB)",
    "GRAPHROOF_INFER_TIME_S": "time budget of ONNX shape inference in its forked child, in seconds (default 300)",
    "GRAPHROOF_MAX_LAYERS": "most layers a transformers config may declare before it is refused (default 1000)",
    "GRAPHROOF_ONNX_GUARD": "0: run ONNX shape inference in process, without the budgets (default 1: forked child)",
}


def env(name: str, default: str | None = None) -> str | None:
    """The value of environment variable *name*, which must be listed in :data:`ENV`."""
    if name not in ENV:
        raise KeyError(f"{name} is not a documented graphroof environment variable (add it to graphroof.options.ENV)")
    return os.environ.get(name, default)


@dataclass(frozen=True)
class Options:
    """Run-wide switches of one call.

    fold : torch captures fold runs of identical blocks (trace one, repeat its ops); ``False`` traces every block.
    store : captures are read from / written to the trace store (still off when ``GRAPHROOF_CACHE=off``).
    """

    fold: bool = True
    store: bool = True

    def with_(self, **changes: object) -> Options:
        return replace(self, **changes)  # type: ignore[arg-type]


DEFAULT = Options()
