"""The analyze page's what-if panel: batch, sequence, dtypes, TP and device re-priced in the browser.

The costs come from the result (``Analysis.whatif``, computed by :mod:`graphroof.sweeps.whatif_costs` when the
HTML format is asked for); this module only lays them out: the panel's fields, the kernel -> chart point map,
the chart's axes, and the data as an inline JSON script (``<`` ``>`` ``&`` escaped, so a model's names cannot end
it).  ``templates/whatif.js`` prices every kernel ``max(matrix / peak_m + vector / peak_v, bytes / bandwidth)``
(as :func:`graphroof.roofline.evaluate`) and moves the layer points.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from markupsafe import Markup

from ..units import fmt_time
from .chart import _H, _MB, _ML, _MR, _MT, _W, ChartData, _ranges

__all__ = ["whatif_panel", "whatif_json", "SIMPLIFICATIONS"]

#: What the page's re-pricing leaves out, said on the page.
SIMPLIFICATIONS = (
    "Re-priced in this page: the roofline time (per kernel max(FLOPs / peak, bytes / bandwidth), summed) and the "
    "launches beside it; the realistic time (GEMM tiles, derating) is Python's and is shown for the traced point "
    "only.",
    "Weight bytes scale by the weight dtype's bits, activation and KV bytes by the activation dtype's bits, over "
    "the traced dtype's; kernels that computed in the traced dtype use the activation dtype's peak.",
    "Tensor parallelism divides the matrix FLOPs and weights of GEMM and attention kernels, the attention kernels' "
    "activations and all KV bytes by the degree; other kernels run whole on every device, GEMM activations are "
    "not split; two ring all-reduces of each attention kernel's output per block are added, 2 (tp-1)/tp x bytes / "
    "the profile's interconnect bandwidth (no latency term).",
    "The ceilings drawn are the analysed device's; with another device the points move against that device's "
    "peaks, not the drawn roofs. Op points and point labels stay at the traced point.",
)


def _escape_json(obj: Any) -> str:
    s = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def whatif_json(phases: list, cd: ChartData) -> dict[str, Any] | None:
    """The page's data: the result's what-if costs + each kernel's chart point + the chart's axes; None when the
    page has no what-if data (several phases, or the result was made without it)."""
    if len(phases) != 1:
        return None
    a = phases[0].analysis
    w = getattr(a, "whatif", None)
    if not w:
        return None
    layers = a.layer_table()
    where = {op: r["name"] for r in layers for op in r["ops"]}
    names = [r["name"] for r in layers]
    idx = {n: i for i, n in enumerate(names)}
    x0, x1, y0, y1 = _ranges(cd)
    return {**w, "layers": names,
            "kernel_layer": [idx.get(where.get(k["first_op"], ""), -1) for k in w["kernels"]],
            "axis": {"x0": x0, "x1": x1, "y0": y0, "y1": y1, "left": _ML, "top": _MT, "pw": _W - _ML - _MR,
                     "ph": _H - _MT - _MB},
            "simplifications": list(SIMPLIFICATIONS)}


def whatif_panel(phases: list, cd: ChartData, env, static_text: Callable[[str], Markup]) -> Markup:
    """The panel's markup (fields, figures, notes, data and script), or empty markup (*env*: the report's Jinja2
    environment, *static_text*: its asset reader, :mod:`.html`)."""
    data = whatif_json(phases, cd)
    if data is None:
        return Markup("")
    tr = data["traced"]
    return Markup(env.get_template("whatif.html.j2").render(
        w=data, data=Markup(_escape_json(data)), js=static_text("whatif.js"),
        t_roof=fmt_time(tr["time_roofline_s"]), t_real=fmt_time(tr["time_realistic_s"])))
