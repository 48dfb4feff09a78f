"""graphroof: how fast can this model run on that hardware, and which resource holds each layer back?

Public API::

    import graphroof
    a = graphroof.analyze("model.onnx", hw="a100")
    print(graphroof.render(a, "markdown"))
    c = graphroof.compare("model.onnx", hw=["a100", "h100"])
"""

from ._version import __version__
from .analysis import Analysis
from .api import analyze, compare
from .counters import FLOPS_PER_MAC, REGISTRY, Cost, CountSummary, count, register_rule
from .errors import (
    FrontendError,
    GraphroofError,
    GraphroofWarning,
    HardwareProfileError,
    InputError,
    ReportError,
    RuleError,
    UnboundDimError,
    UnsupportedOpError,
)
from .graph import OpGraph, OpNode, Role, TensorSpec, bind
from .hardware import HardwareProfile, list_profiles, load_hardware
from .report import render
from .roofline import Bound, evaluate

__all__ = [
    "__version__", "analyze", "compare", "render", "Analysis", "OpGraph", "OpNode", "TensorSpec", "Role", "bind", "Cost",
    "CountSummary", "count", "register_rule", "REGISTRY", "FLOPS_PER_MAC", "HardwareProfile", "load_hardware",
    "list_profiles", "Bound", "evaluate", "GraphroofError", "InputError", "FrontendError", "UnsupportedOpError",
    "RuleError", "UnboundDimError", "HardwareProfileError", "ReportError", "GraphroofWarning",
]

from . import llm  # noqa: E402  (graphroof.llm.estimate: LLM serving estimates)

__all__ += ["llm"]
