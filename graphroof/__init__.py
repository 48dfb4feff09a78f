"""graphroof: how fast can this model run on that hardware, and which resource holds each layer back?

Public API::

    import graphroof
    a = graphroof.analyze("model.onnx", hw="a100")
    with graphroof.capture(hw="h100") as r:   # the ops this block runs (r.analysis after it)
        model(x)
    print(graphroof.render(a, "markdown"))
    c = graphroof.compare("model.onnx", hw=["a100", "h100"])
    s = graphroof.sweep("llama-3-8b", hw=["a100", "h100"], batch=[1, 8, 64])   # LLM or batch sweep
    r = graphroof.serve("llama-3-8b", hw="h100", rate=[1, 4, 16], slo_ttft_s=2.0)  # serving under traffic
    p = graphroof.plan("llama-3-70b", hw=["h100", "h200"], rate=[4, 16], slo_ttft_s=2.0)  # configuration search
    v = graphroof.validate("trtllm,gptfast")   # errors against the bundled published measurements
"""

from ._version import __version__
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

#: Public name -> the submodule that defines it.  Imported on first use (PEP 562), so ``graphroof hw list`` and
#: the CLI start without loading the counting pipeline, networkx or any frontend.
_LAZY = {
    "Analysis": "analysis", "analyze": "api", "capture": "api", "compare": "api",
    "FLOPS_PER_MAC": "counters", "REGISTRY": "counters", "Cost": "counters", "CountSummary": "counters",
    "count": "counters", "register_rule": "counters",
    "OpGraph": "graph", "OpNode": "graph", "Role": "graph", "TensorSpec": "graph", "bind": "graph",
    "HardwareProfile": "hardware", "list_profiles": "hardware", "load_hardware": "hardware",
    "render": "report", "Bound": "roofline", "evaluate": "roofline",
    "sweep": "sweeps", "serve": "serving", "validate": "validate",
    "plan": "planner",
}

__all__ = [
    "__version__", "analyze", "capture", "compare", "render", "Analysis", "OpGraph", "OpNode", "TensorSpec", "Role",
    "bind", "Cost",
    "CountSummary", "count", "register_rule", "REGISTRY", "FLOPS_PER_MAC", "HardwareProfile", "load_hardware",
    "list_profiles", "Bound", "evaluate", "GraphroofError", "InputError", "FrontendError", "UnsupportedOpError",
    "RuleError", "UnboundDimError", "HardwareProfileError", "ReportError", "GraphroofWarning", "llm", "sweep", "serve",
    "validate", "plan",
]


def __getattr__(name: str):
    import importlib

    if name == "llm":  # graphroof.llm.estimate: LLM serving estimates
        return importlib.import_module(".llm", __name__)
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'graphroof' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


#: the results a notebook shows as their HTML report (module, class), registered by name: nothing is imported
NOTEBOOK_RESULTS = (("graphroof.analysis", "Analysis"), ("graphroof.llm.result", "LLMEstimate"),
                    ("graphroof.sweeps.points", "SweepResult"), ("graphroof.sweeps.batch", "BatchSweep"),
                    ("graphroof.comparison", "DeviceComparison"), ("graphroof.serving.result", "ServeResult"))


def notebook_html(result: object) -> str:
    """A result's HTML report body for a notebook cell (the page :func:`render` gives with ``"html"``)."""
    from .report import render

    return str(render(result, "html", fragment=True))


def _register_notebook_display() -> None:
    """In IPython / Jupyter, show results as their HTML report: a formatter registered by class name, so the
    results themselves hold no renderer (report/ sits above them)."""
    import sys

    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", None)
    if not formatters or "text/html" not in formatters:
        return
    for module, name in NOTEBOOK_RESULTS:
        formatters["text/html"].for_type_by_name(module, name, notebook_html)


_register_notebook_display()
