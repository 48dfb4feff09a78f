"""The fuse stage of the spine: counted op graph -> the kernels a runtime runs (:func:`fuse`).

frontend -> OpGraph -> count -> **fuse** -> roofline -> phases -> rollup -> report.  Presets
(:data:`RUNTIMES`: ``eager``, ``pytorch-eager``, ``compiled``, ``serving`` / ``vllm``, ``tensorrt`` ...) are TOML
files in ``presets/``; see :mod:`graphroof.fuse.runtimes`.
"""

from .classify import op_class
from .group import Kernel, KernelGraph, fuse
from .runtimes import RUNTIMES, Runtime, get_runtime

__all__ = ["fuse", "Kernel", "KernelGraph", "Runtime", "RUNTIMES", "get_runtime", "op_class"]
