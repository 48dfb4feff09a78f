"""The roofline chart: one data model, two drawings.

:func:`chart_data` turns phases into ceilings (memory slope, matrix / vector roofs per dtype, ridge points)
and points (one per layer and one per op: x = arithmetic intensity, y = FLOPs / roofline time).
:func:`svg_geometry` lays them out on log-log axes for the HTML report's inline SVG (the template draws it,
so every name is autoescaped); :func:`render_static` draws the same chart with matplotlib (Agg) as PNG / SVG.

Items with no FLOPs (intensity 0) or no bytes (intensity inf) have no place on log axes; they are counted in
``ChartData.skipped`` and drawn on a strip under the chart (``ChartData.strip``), sized by time share.

Layer points are the folded layer rows (:meth:`graphroof.analysis.Analysis.layer_table`): ``model.layers.* ×32`` is one point with a ``×32`` badge.
The points that matter (the largest time shares) get a text label, placed by :func:`place_labels` beside the
point where it overlaps no other label, roof label, legend or point; a label with no free place is left out
(the tooltip still names the point).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any

from ..dtypes import is_float
from ..errors import ReportError
from ..units import fmt_bytes, fmt_flops, fmt_rate, fmt_time

__all__ = ["Ceiling", "Point", "ChartData", "chart_data", "svg_geometry", "render_static", "BOUND_COLORS",
           "PHASE_SHAPES"]

#: Colour-blind-safe (Okabe-Ito) colours by bound.
BOUND_COLORS = {"compute": "#0072B2", "memory": "#E69F00", "network": "#009E73"}
#: Marker per phase, in phase order.
PHASE_SHAPES = ("circle", "square", "triangle", "diamond")
_MPL_MARKERS = {"circle": "o", "square": "s", "triangle": "^", "diamond": "D"}


@dataclass(frozen=True)
class Ceiling:
    key: str            # "matrix.bf16"
    unit: str           # "matrix" | "vector"
    peak_flops_per_s: float
    ridge: float        # FLOP/byte where the memory slope meets this roof
    used: bool          # some op computes on it


@dataclass(frozen=True)
class Point:
    phase: int
    level: str          # "layer" | "op"
    name: str
    kind: str           # op key for ops, "N ops" for layers
    flops: float
    bytes: float
    intensity: float
    perf: float         # FLOPs / roofline time
    time_s: float
    share: float
    bound: str
    repeat: int = 1     # folded blocks in this layer point (the ×N badge)

    @property
    def label(self) -> str:
        return self.name + (f" ×{self.repeat}" if self.repeat > 1 else "")

    def tooltip(self, phase_name: str) -> str:
        return (f"{self.name}\n{self.kind}{f' · ×{self.repeat} identical blocks' if self.repeat > 1 else ''} · {phase_name}\nFLOPs {fmt_flops(self.flops)}\nbytes "
                f"{fmt_bytes(self.bytes)}\nintensity {self.intensity:.3g} FLOP/B\nachieved {fmt_rate(self.perf)}"
                f"\ntime {fmt_time(self.time_s)} ({100 * self.share:.1f}%)\n{self.bound}-bound")


@dataclass
class ChartData:
    hw_label: str
    mem_bw_bytes_per_s: float
    ceilings: list[Ceiling]
    points: list[Point]
    phases: list[str]
    #: (phase, level) -> (items not plotted, their time share)
    skipped: dict[tuple[int, str], tuple[int, float]] = field(default_factory=dict)
    #: the items with work but no FLOPs or no bytes (intensity 0 or inf): drawn on the strip under the chart
    strip: list[Point] = field(default_factory=list)

    def skipped_notes(self, level: str) -> list[str]:
        out = []
        for (ph, lv), (n, share) in sorted(self.skipped.items()):
            if lv == level and n:
                where = f" ({self.phases[ph]})" if len(self.phases) > 1 else ""
                out.append(f"{n} {level}{'s' if n != 1 else ''}{where} with no FLOPs or no bytes "
                           f"{'are' if n != 1 else 'is'} not on the log-log chart ({100 * share:.1f}% of the time)")
        return out


def chart_data(phases) -> ChartData:
    """Ceilings and points for ``[Phase, ...]`` (see :mod:`graphroof.report.content`)."""
    hw = phases[0].analysis.hw
    bw = hw.mem_bw_bytes_per_s
    used: dict[str, None] = {}
    dtypes: dict[str, None] = {}
    for p in phases:
        used.update(dict.fromkeys(p.analysis.peaks_used()))
        dtypes.update(dict.fromkeys(p.analysis.dtypes_used()))
    keys: dict[str, float] = {}
    # roofs of every float dtype the model computes in (index arithmetic in int64 draws no roof of its own;
    # any peak an op actually used is added below)
    for dt in ([d for d in dtypes if is_float(d)] or ["bf16"]):
        for unit in ("matrix", "vector"):
            peak, key = hw.peak(unit, dt)
            keys.setdefault(key, peak)
    for key in used:
        unit, dt = key.split(".")
        keys.setdefault(key, hw.peak(unit, dt)[0])
    ceilings = sorted((Ceiling(k, k.split(".")[0], v, v / bw, k in used) for k, v in keys.items() if v > 0),
                      key=lambda c: -c.peak_flops_per_s)
    points: list[Point] = []
    strip: list[Point] = []
    skipped: dict[tuple[int, str], tuple[int, float]] = {}
    for i, p in enumerate(phases):
        a = p.analysis
        for level, rows in (("layer", a.layer_table()), ("op", a.ops)):
            n_skip, share_skip = 0, 0.0
            for r in rows:
                ai, t = r["intensity"], r["time_s"]
                kind = r["op"] if level == "op" else f"{r['n_ops']} op{'s' if r['n_ops'] != 1 else ''}"
                rep = int(r.get("repeat", 1) or 1)
                if not r["flops"] or not r["bytes"] or not t or ai is None or not math.isfinite(ai):
                    if r["flops"] or r["bytes"]:
                        n_skip += 1
                        share_skip += r["share"]
                        strip.append(Point(i, level, r["name"], kind, r["flops"], r["bytes"], ai or 0.0,
                                           r["flops"] / t if t else 0.0, t, r["share"], r["bound"], rep))
                    continue
                points.append(Point(i, level, r["name"], kind, r["flops"], r["bytes"], ai, r["flops"] / t, t,
                                    r["share"], r["bound"], rep))
            skipped[(i, level)] = (n_skip, share_skip)
    return ChartData(hw.label, bw, ceilings, points, [p.name for p in phases], skipped, strip)


# -- SVG layout -------------------------------------------------------------------------------------------

_W, _H = 860, 500
_ML, _MR, _MT, _MB = 72, 190, 18, 52
_SI = {-3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def _decade_label(k: int, unit: str = "") -> str:
    """``10**k`` as ``0.01``, ``1``, ``100``, ``1k``, ``10T``."""
    if -4 <= k < 0:
        return f"{10.0 ** k:g}{unit}"
    e3 = 3 * math.floor(k / 3)
    if e3 in _SI and k >= -3:
        return f"{10 ** (k - e3):g}{_SI[e3]}{unit}"
    return f"1e{k}{unit}"


def _radius(share: float, biggest: float = 1.0) -> float:
    """Marker radius (px): area grows with the time share, the biggest item of the level gets 16 px."""
    return 3.0 + 13.0 * math.sqrt(max(share, 0.0) / biggest) if biggest > 0 else 3.0


def _biggest(cd: ChartData) -> dict[str, float]:
    out: dict[str, float] = {}
    for p in cd.points:
        out[p.level] = max(out.get(p.level, 0.0), p.share)
    return out


def _shape_path(shape: str, x: float, y: float, r: float) -> str:
    if shape == "square":
        s = r * 0.89
        return f"M{x - s:.1f} {y - s:.1f}h{2 * s:.1f}v{2 * s:.1f}h{-2 * s:.1f}z"
    if shape == "triangle":
        s = r * 1.2
        return f"M{x:.1f} {y - s:.1f}L{x + s * 0.87:.1f} {y + s * 0.5:.1f}L{x - s * 0.87:.1f} {y + s * 0.5:.1f}z"
    s = r * 1.15  # diamond
    return f"M{x:.1f} {y - s:.1f}L{x + s:.1f} {y:.1f}L{x:.1f} {y + s:.1f}L{x - s:.1f} {y:.1f}z"


def _ranges(cd: ChartData) -> tuple[int, int, int, int]:
    """(log10 x-min, x-max, y-min, y-max), whole decades, covering points, ridges and roofs."""
    xs = [p.intensity for p in cd.points] + [c.ridge for c in cd.ceilings]
    ys = [p.perf for p in cd.points] + [c.peak_flops_per_s for c in cd.ceilings]
    if not xs:
        xs, ys = [1.0], [1.0]
    x0, x1 = math.floor(math.log10(min(xs) / 2)), math.ceil(math.log10(max(xs) * 3))
    y1 = math.ceil(math.log10(max(ys) * 1.6))
    y0 = math.floor(math.log10(min(ys) / 2))
    y0 = max(y0, y1 - 9)  # the memory slope enters through the bottom edge when it starts below
    return x0, max(x1, x0 + 1), y0, max(y1, y0 + 1)


#: Labelled points per level: the largest time shares, at least this share each.
LABEL_TOP, LABEL_MIN_SHARE = 8, 0.01
_CHAR_W, _LINE_H = 6.2, 12.0   # 11 px system-ui: mean glyph advance and line box (px)
_STRIP_H = 46                  # height of the no-FLOP / no-byte strip under the chart


def text_box(x: float, y: float, text: str, anchor: str = "start", char_w: float = _CHAR_W,
             line_h: float = _LINE_H) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) of a label with baseline at *y* (11 px SVG text by default)."""
    w = char_w * len(text)
    x0 = x - w if anchor == "end" else (x - w / 2 if anchor == "middle" else x)
    return (x0, y - line_h + 3, x0 + w, y + 3)


def _overlaps(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def place_labels(cands: list[dict[str, Any]], obstacles: list[tuple], area: tuple, char_w: float = _CHAR_W,
                 line_h: float = _LINE_H) -> list[dict[str, Any]]:
    """Greedy placement, biggest first: each candidate (``x``, ``y``, ``r``, ``text``) tries 8 spots around its
    point; the first whose box stays inside *area* and overlaps no obstacle and no placed label wins."""
    placed: list[dict[str, Any]] = []
    boxes = list(obstacles)
    for c in cands:
        x, y, r = c["x"], c["y"], c["r"]
        d = r + 3
        spots = [(x + d, y + 4, "start"), (x - d, y + 4, "end"), (x, y - d - 2, "middle"), (x, y + d + 10, "middle"),
                 (x + d, y - d, "start"), (x - d, y - d, "end"), (x + d, y + d + 8, "start"), (x - d, y + d + 8, "end")]
        for lx, ly, anchor in spots:
            box = text_box(lx, ly, c["text"], anchor, char_w, line_h)
            if box[0] < area[0] or box[2] > area[2] or box[1] < area[1] or box[3] > area[3]:
                continue
            own = (x - r, y - r, x + r, y + r)
            if any(_overlaps(box, o) for o in boxes if o != own):
                continue
            boxes.append(box)
            placed.append({**c, "lx": round(lx, 1), "ly": round(ly, 1), "anchor": anchor, "box": box})
            break
    return placed


def _legend_y(bottom: float, top: float, n: int, roof_boxes: list[tuple]) -> float:
    """Top y of the legend (n rows of 16 px) in the right margin: as low as possible, clear of roof labels."""
    y = bottom - 16 * n - 4
    while y > top:
        box = (0, y - 8, 1e9, y + 16 * (n - 1) + 8)
        if not any(_overlaps(box, (0, b[1], 1e9, b[3])) for b in roof_boxes):
            return y
        y -= 4
    return bottom - 16 * n - 4


def svg_geometry(cd: ChartData) -> dict[str, Any]:
    """Everything the template needs to draw the chart, in pixels (names stay plain text for autoescape)."""
    x0, x1, y0, y1 = _ranges(cd)
    pw, ph = _W - _ML - _MR, _H - _MT - _MB

    def X(v: float) -> float:
        return _ML + (math.log10(v) - x0) / (x1 - x0) * pw

    def Y(v: float) -> float:
        return _MT + (y1 - math.log10(v)) / (y1 - y0) * ph

    step_x = 1 if x1 - x0 <= 8 else 2
    step_y = 1 if y1 - y0 <= 8 else 2
    xticks = [(X(10.0 ** k), _decade_label(k)) for k in range(x0, x1 + 1, step_x)]
    yticks = [(Y(10.0 ** k), _decade_label(k)) for k in range(y0, y1 + 1, step_y)]
    minor = []
    for k in range(x0, x1):
        minor += [f"M{X(m * 10.0 ** k):.1f} {_MT}V{_MT + ph}" for m in range(2, 10)]
    for k in range(y0, y1):
        minor += [f"M{_ML} {Y(m * 10.0 ** k):.1f}H{_ML + pw}" for m in range(2, 10)]
    # memory slope from the left edge (or the bottom) up to the highest roof's ridge
    bw = cd.mem_bw_bytes_per_s
    xlo = max(10.0 ** x0, 10.0 ** y0 / bw)
    top = cd.ceilings[0] if cd.ceilings else None
    xhi = top.ridge if top else 10.0 ** x1
    slope = f"M{X(xlo):.1f} {Y(bw * xlo):.1f}L{X(xhi):.1f} {Y(bw * xhi):.1f}"
    roofs: list[dict[str, Any]] = []
    last_label_y = -1e9
    for c in cd.ceilings:
        if c.peak_flops_per_s < 10.0 ** y0:
            continue
        y = Y(c.peak_flops_per_s)
        ly = max(y + 4, last_label_y + 13)
        last_label_y = ly
        roofs.append({"key": c.key, "unit": c.unit, "used": c.used, "x": X(c.ridge), "x_end": _ML + pw, "y": y,
                      "label_y": ly, "label": f"{c.key} {fmt_rate(c.peak_flops_per_s)}",
                      "ridge_label": f"ridge {c.ridge:.3g} FLOP/B",
                      "title": f"{c.key} roof: {fmt_rate(c.peak_flops_per_s)} dense; ridge point "
                               f"{c.ridge:.3g} FLOP/B = peak / {fmt_rate(bw, 'B/s')}"})
    pts: list[dict[str, Any]] = []
    biggest = _biggest(cd)
    for p in sorted(cd.points, key=lambda q: -q.share):  # big first, so small ones stay clickable on top
        x, y, r = X(p.intensity), Y(max(p.perf, 10.0 ** y0)), _radius(p.share, biggest[p.level])
        shape = PHASE_SHAPES[p.phase % len(PHASE_SHAPES)]
        pts.append({"level": p.level, "phase": p.phase, "name": p.name, "bound": p.bound, "shape": shape,
                    "x": round(x, 1), "y": round(y, 1), "r": round(r, 1), "share": p.share, "text": p.label,
                    "d": "" if shape == "circle" else _shape_path(shape, x, y, r),
                    "color": BOUND_COLORS.get(p.bound, "#777"), "title": p.tooltip(cd.phases[p.phase])})
    area = (_ML + 2, _MT + 2, _ML + pw - 2, _MT + ph - 2)
    ridge_boxes = [text_box(r["x"] - 7, r["y"] - 5, r["ridge_label"], "end") for r in roofs]
    labels = []
    for level in ("layer", "op"):
        lv = [q for q in pts if q["level"] == level]
        obstacles = ridge_boxes + [(q["x"] - q["r"], q["y"] - q["r"], q["x"] + q["r"], q["y"] + q["r"]) for q in lv]
        cands = [q for q in lv if q["share"] >= LABEL_MIN_SHARE][:LABEL_TOP]
        labels += place_labels(cands, obstacles, area)
    # the no-FLOP / no-byte strip: under the x-axis label, left to right by time share
    strip_y = _H + _STRIP_H / 2 - 2
    strip, sx = [], _ML + 10.0
    big_s = max((q.share for q in cd.strip), default=0.0)
    for q in sorted(cd.strip, key=lambda q: -q.share):
        r = _radius(q.share, big_s) if big_s else 3.0
        shape = PHASE_SHAPES[q.phase % len(PHASE_SHAPES)]
        strip.append({"level": q.level, "phase": q.phase, "name": q.name, "bound": q.bound, "shape": shape,
                      "x": round(sx + r, 1), "y": strip_y, "r": round(r, 1),
                      "d": "" if shape == "circle" else _shape_path(shape, sx + r, strip_y, r),
                      "title": q.tooltip(cd.phases[q.phase]) + ("\nno FLOPs: not on the log axes" if not q.flops
                                                               else "\nno bytes: not on the log axes")})
        sx = min(sx + 2 * r + 3, _ML + pw - 20)
    roof_boxes = [text_box(r["x_end"] + 6, r["label_y"], r["label"]) for r in roofs]
    n_leg = len(sorted({p.bound for p in cd.points}) or ["compute", "memory"]) + (len(cd.phases) if len(cd.phases) > 1 else 0)
    return {"width": _W, "height": _H + (_STRIP_H if strip else 0), "left": _ML, "top": _MT, "pw": pw, "ph": ph,
            "labels": labels, "strip": strip, "strip_y": strip_y,
            "legend_y": _legend_y(_MT + ph, _MT, n_leg, roof_boxes), "xticks": xticks,
            "yticks": yticks, "minor": "".join(minor), "slope": slope, "bw_label": f"memory {fmt_rate(bw, 'B/s')}",
            "slope_label_xy": _along(X(xlo), Y(bw * xlo), X(xhi), Y(bw * xhi)),
            "slope_angle": math.degrees(math.atan2(Y(bw * xhi) - Y(bw * xlo), X(xhi) - X(xlo))),
            "roofs": roofs, "points": pts, "phases": cd.phases, "colors": BOUND_COLORS,
            "bounds": sorted({p.bound for p in cd.points}) or ["compute", "memory"],
            "shapes": [PHASE_SHAPES[i % len(PHASE_SHAPES)] for i in range(len(cd.phases))]}


def _along(sx0: float, sy0: float, sx1: float, sy1: float, dist: float = 14.0, lift: float = 6.0) -> tuple[float, float]:
    """A label anchor *dist* px along the segment from its start and *lift* px above it."""
    th = math.atan2(sy1 - sy0, sx1 - sx0)
    return (sx0 + dist * math.cos(th) + lift * math.sin(th), sy0 + dist * math.sin(th) - lift * math.cos(th))


# -- static image ----------------------------------------------------------------------------------------

def _annotate_points(fig, ax, pts: list[Point], y0: int) -> None:
    """Labels on the largest points of the PNG, placed in pixel space like the SVG's (no overlaps)."""
    H = fig.get_size_inches()[1] * fig.dpi
    pt_px = fig.dpi / 72.0
    char_w, line_h = 7.0 * 0.55 * pt_px, 7.0 * 1.25 * pt_px
    big = max((p.share for p in pts), default=1.0) or 1.0
    items = []
    for p in sorted(pts, key=lambda q: -q.share):
        px, py = ax.transData.transform((p.intensity, max(p.perf, 10.0 ** y0)))
        r = 1.2 * _radius(p.share, big) * fig.dpi / 72.0 / 2 * 1.1
        items.append({"x": px, "y": H - py, "r": r, "text": p.label, "share": p.share})
    bb = ax.get_window_extent()
    area = (bb.x0 + 2, H - bb.y1 + 2, bb.x1 - 2, H - bb.y0 - 2)
    obstacles = [(q["x"] - q["r"], q["y"] - q["r"], q["x"] + q["r"], q["y"] + q["r"]) for q in items]
    for t in ax.texts:  # the roof labels
        e = t.get_window_extent(fig.canvas.get_renderer())
        obstacles.append((e.x0, H - e.y1, e.x1, H - e.y0))
    leg = ax.get_legend()
    if leg is not None:
        e = leg.get_window_extent(fig.canvas.get_renderer())
        obstacles.append((e.x0, H - e.y1, e.x1, H - e.y0))
    cands = [q for q in items if q["share"] >= LABEL_MIN_SHARE][:LABEL_TOP]
    for lab in place_labels(cands, obstacles, area, char_w, line_h):
        x, y = ax.transData.inverted().transform((lab["lx"], H - lab["ly"]))
        ax.annotate(lab["text"], (x, y), fontsize=7, color="#222", zorder=5,
                    ha={"start": "left", "end": "right", "middle": "center"}[lab["anchor"]], va="baseline")

def render_static(cd: ChartData, fmt: str = "png", level: str = "layer", title: str = "") -> bytes:
    """The chart as PNG or SVG bytes, drawn with matplotlib's Agg canvas (no GUI, no pyplot state)."""
    if fmt not in ("png", "svg"):
        raise ReportError(f"cannot draw a {fmt!r} image; use a .png or .svg output path")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise ReportError("images need matplotlib: pip install 'graphroof[plot]'") from None
    x0, x1, y0, y1 = _ranges(cd)
    fig = Figure(figsize=(8.6, 5.2), dpi=150)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(10.0 ** x0, 10.0 ** x1)
    ax.set_ylim(10.0 ** y0, 10.0 ** y1)
    bw = cd.mem_bw_bytes_per_s
    xlo = max(10.0 ** x0, 10.0 ** y0 / bw)
    xhi = cd.ceilings[0].ridge if cd.ceilings else 10.0 ** x1
    ax.plot([xlo, xhi], [bw * xlo, bw * xhi], color="#333", lw=1.6)
    for c in cd.ceilings:
        ls = "-" if c.unit == "matrix" else "--"
        ax.plot([c.ridge, 10.0 ** x1], [c.peak_flops_per_s] * 2, color="#333" if c.used else "#999", lw=1.4, ls=ls)
        ax.plot([c.ridge], [c.peak_flops_per_s], marker="o", ms=4, color="#333", mfc="white")
        # the label sits above the right end of its roof, where points rarely are (none can be above a roof)
        ax.annotate(f"{c.key} {fmt_rate(c.peak_flops_per_s)} (ridge {c.ridge:.3g} FLOP/B)", (10.0 ** x1, c.peak_flops_per_s),
                    xytext=(-4, 3), textcoords="offset points", ha="right", fontsize=7.5,
                    color="#333" if c.used else "#888")
    pts = [p for p in cd.points if p.level == level]
    biggest = _biggest(cd).get(level, 1.0)
    for ph in range(len(cd.phases)):
        marker = _MPL_MARKERS[PHASE_SHAPES[ph % len(PHASE_SHAPES)]]
        for bound, color in BOUND_COLORS.items():
            sel = sorted((p for p in pts if p.phase == ph and p.bound == bound), key=lambda q: -q.share)
            if sel:
                ax.scatter([p.intensity for p in sel], [max(p.perf, 10.0 ** y0) for p in sel],
                           s=[(1.2 * _radius(p.share, biggest)) ** 2 for p in sel], c=color, marker=marker, alpha=0.75,
                           edgecolors="white", linewidths=0.5, zorder=3)
    handles = [Line2D([], [], ls="", marker="o", color=c, label=f"{b}-bound") for b, c in BOUND_COLORS.items()
               if any(p.bound == b for p in pts)]
    if len(cd.phases) > 1:
        handles += [Line2D([], [], ls="", marker=_MPL_MARKERS[PHASE_SHAPES[i % 4]], color="#555", mfc="none",
                           label=name) for i, name in enumerate(cd.phases)]
    if handles:
        ax.legend(handles=handles, loc="lower right", fontsize=8, framealpha=0.9)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP/s (FLOPs / roofline time)")
    ax.grid(True, which="major", color="#ddd", lw=0.6)
    ax.grid(True, which="minor", color="#f0f0f0", lw=0.4)
    ax.set_axisbelow(True)
    ax.set_title(title or f"Roofline: {cd.hw_label} ({level}s, size = time share)", fontsize=10)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _decade_label(round(math.log10(v))) if v > 0 else ""))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _decade_label(round(math.log10(v))) if v > 0 else ""))
    fig.tight_layout()
    # the slope label follows the line's on-screen angle, known once the layout is fixed
    (px0, py0), (px1, py1) = ax.transData.transform([(xlo, bw * xlo), (xhi, bw * xhi)])
    theta = math.atan2(py1 - py0, px1 - px0)
    along, above = 30 * fig.dpi / 100, 6 * fig.dpi / 100
    ax.annotate(f"memory {fmt_rate(bw, 'B/s')}", (xlo, bw * xlo), textcoords="offset pixels",
                xytext=(along * math.cos(theta) - above * math.sin(theta),
                        along * math.sin(theta) + above * math.cos(theta)),
                fontsize=8, color="#333", rotation=math.degrees(theta), rotation_mode="anchor")
    _annotate_points(fig, ax, pts, y0)
    buf = io.BytesIO()
    meta = {"Software": None} if fmt == "png" else {"Date": None, "Creator": "graphroof"}
    fig.savefig(buf, format=fmt, metadata=meta)
    return buf.getvalue()
