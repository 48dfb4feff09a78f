"""GPU hold-out of the sustained matmul rates fitted on a device's own validation rows.

A profile whose ``[timing]`` is derived from another GPU (``sources.timing`` starts with "derived") may still carry
one constant fitted on its own rows: a ``[timing.gemm_achievable_flops_per_s]`` entry that ``sources.timing`` cites
as ``<dtype> <rate> TFLOP/s, fitted`` (the T4's power-limited fp16 tensor rate and CUDA-core fp32 rate, the A10's
bf16 / fp16 rate, the V100's fp32 rate: each fitted on one vision_encoder.csv row of that GPU).  Under
``--holdout gpu`` such an entry is replaced by what the *other* GPUs' fitted entries of the same kind (fp16 and
bf16 tensor rates are one kind: they run alike) say through two physical units, the lower of

* the device's board power (``board_power_w``, datasheet) x the FLOP per joule of board power of the other GPUs
  whose fitted rate is power-limited (rate / board power, median): a board at its power limit sustains what its
  watts buy, so the clock it holds is set by energy per FLOP, not by a fraction of its boost-clock peak (T4 70 W:
  2.26 pJ per fp16 tensor FLOP, A10 150 W: 1.90 pJ; both do 1,024 dense fp16 tensor FLOP per SM per clock, as
  does the V100, so this is also energy per SM clock cycle);
* the device's datasheet peak of that dtype x the full-clock ratio: the median sustained / peak ratio of the other
  GPUs whose fitted rate ran at full clock, else the generic ratio of the entries not fitted on validation rows
  (the MAMF-table ratio the derived profiles apply, :func:`generic_ratio`).

An other GPU's fitted rate counts as power-limited when it is below the generic ratio x its peak (T4 fp16 0.477,
T4 fp32 0.568, A10 bf16 0.632, A10 fp32 0.388 of peak, each under 0.803), as at full clock otherwise (V100 fp32
0.86: SGEMM's 13.5 TFLOP/s at the T4's 15.2 or the A10's 12.4 pJ per FLOP draws 205 / 167 W of its 300 W).  The
energy unit also covers GA102's fp32 peak, which counts the second FP32/INT32 datapath of each SM partition: a
power-limited SGEMM rate is set by joules per FLOP, whichever lanes issue it.  Energy per FLOP differs by process
node (T4 and V100 TSMC 12 nm, A10 Samsung 8 nm), which this does not model.  Entries not cited as fitted (the
MAMF-table measurements and their derivations) stay.

Each such rate was fitted on one row of one engine (:data:`RATE_FITS`); under ``--holdout engine`` that engine's
rows on that GPU take the rate transferred from the GPUs whose rate of the kind was fitted on another engine's rows,
else the generic ratio (:func:`engine_held_profile`).

A derived profile may also carry a latency level fitted on its own rows: ``sources.timing`` cites ``latency level
<k>, fitted`` where its ``gemm_latency_s`` / ``stream_latency_s`` are the derived latencies (another GPU's fits
scaled by the clock ratio) times *k* (the V100's, fitted on its TensorRT 7.2 batch-1 rows: :data:`LATENCY_FITS`).
Held out (``--holdout gpu``; ``--holdout engine`` for the rows of the engine it was fitted on), the level is dropped:
both latencies divided by *k*, the derived values, which no row of the device set.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import replace

from ..hardware import HardwareProfile, list_profiles

__all__ = ["fitted_rates", "achievable_held_out", "rate_kind", "peak_of", "generic_ratio", "rate_notes", "RATE_FITS",
           "engine_held_profile", "LATENCY_FITS", "latency_level", "latency_held_out"]

#: (profile, dtype) of a fitted rate -> (dataset, the start of Row.engine) of the row it was fitted on, as its
#: sources.timing names it (tests/test_holdout_fits.py checks every fitted rate has one)
RATE_FITS: dict[tuple[str, str], tuple[str, str]] = {
    ("t4-16gb-pcie", "fp16"): ("vision", "TensorRT 7.2"),             # TensorRT 7.2.3.4 BERT-large fp16 b64 s384
    ("t4-16gb-pcie", "fp32"): ("vision", "FasterTransformer PyTorch"),  # FT PyTorch op BERT-base fp32 b32 s384
    ("a10-24gb-pcie", "bf16"): ("vision", "FasterTransformer PyTorch"),  # FT PyTorch op BERT-base fp16 b32 s384
    ("a10-24gb-pcie", "fp32"): ("vision", "FasterTransformer PyTorch"),  # FT PyTorch op BERT-base fp32 b32 s384
    ("v100-sxm2-32gb", "fp32"): ("vision", "FasterTransformer PyTorch"),  # FT PyTorch op BERT-base fp32 b32 s384
}

#: profile -> (dataset, the start of Row.engine) of the rows its latency level was fitted on (sources.timing)
LATENCY_FITS: dict[str, tuple[str, str]] = {
    "v100-sxm2-32gb": ("vision", "TensorRT 7.2"),  # TensorRT 7.2.3.4 demo/BERT fp16 batch 1, BERT-base / large
}
#: ``latency level <k>, fitted`` in sources.timing: the derived latencies times a level fitted on the device's rows
_LEVEL = re.compile(r"latency level ([0-9.]+), fitted")

#: ``<dtype> [(...)] <rate> TFLOP/s, fitted`` in sources.timing: an achievable-rate entry fitted on the device's rows
_FIT = re.compile(r"\b(fp16|bf16|fp32|tf32|fp8)\b(?: \([^)]*\))? ([0-9.]+) TFLOP/s, fitted")


def rate_kind(dtype: str) -> str:
    """What an achievable-rate entry transfers as: fp16 and bf16 tensor rates are one kind (they run alike)."""
    return "fp16" if dtype in ("fp16", "bf16") else dtype


def peak_of(hw: HardwareProfile, dtype: str) -> float | None:
    """The datasheet peak an achievable *dtype* rate is a fraction of: the tensor (matrix) peak of the dtype or of
    its same-rate twin, else the CUDA-core (vector) peak (fp32 on a GPU without TF32: SGEMM)."""
    m = hw.matrix_peak_flops_per_s
    twin = {"fp16": "bf16", "bf16": "fp16"}.get(dtype, "")
    return m.get(dtype) or m.get(twin) or hw.vector_peak_flops_per_s.get(dtype)


def fitted_rates(hw: HardwareProfile) -> dict[str, float]:
    """dtype -> achievable rate of the profile's entries that ``sources.timing`` cites as fitted (on its own rows)."""
    table = hw.timing.gemm_achievable_flops_per_s if hw.timing is not None else {}
    if not table:
        return {}
    cited = {m.group(1) for m in _FIT.finditer(hw.sources.get("timing", ""))}
    return {d: table[d] for d in sorted(cited) if table.get(d)}


def _others(exclude: str, kind: str, fitted: bool,
            engine: tuple[str, str] | None = None) -> list[tuple[HardwareProfile, float, float]]:
    """(profile, rate, peak) of the *kind* entries of every profile but *exclude*: those fitted on their own rows
    (*fitted*; with *engine*, only those not fitted on that engine's rows) or those not."""
    out = []
    for o in list_profiles():
        if o.name == exclude or o.timing is None:
            continue
        own = fitted_rates(o)
        for d, v in o.timing.gemm_achievable_flops_per_s.items():
            peak = peak_of(o, d)
            if rate_kind(d) == kind and (d in own) == fitted and peak and \
                    (engine is None or RATE_FITS.get((o.name, d)) != engine):
                out.append((o, v, peak))
    return out


def _ratios(exclude: str, kind: str, fitted: bool, engine: tuple[str, str] | None = None) -> list[float]:
    """Sustained / peak ratios of :func:`_others`' entries."""
    return [v / peak for _, v, peak in _others(exclude, kind, fitted, engine)]


def generic_ratio(kind: str, exclude: str = "") -> float | None:
    """The median sustained / peak ratio of the achievable entries not fitted on validation rows (the MAMF-table
    rows and the profiles derived from them), of *kind*, else of the fp16 tensor kind."""
    vals = _ratios(exclude, kind, False) or _ratios(exclude, "fp16", False)
    return statistics.median(vals) if vals else None


def _held_rate(hw: HardwareProfile, dtype: str, engine: tuple[str, str] | None = None) -> tuple[float | None, str]:
    """(the held-out rate of *hw*'s fitted *dtype* entry, how it was found); *engine*: from the other GPUs' rates
    not fitted on that engine's rows.

    rate = min(board power x FLOP per joule, full-clock ratio x peak) (module doc): an other GPU's fitted rate
    below the generic full-clock ratio x its peak is power-limited and gives a FLOP per joule of board power
    (rate / board_power_w); one at or above it ran at its clock and gives a full-clock ratio (rate / peak).
    Each is the median over the other GPUs that give one; the full-clock ratio is the generic ratio where none
    does, and there is no power term where none gives a FLOP per joule (or *hw* has no board power)."""
    peak, kind = peak_of(hw, dtype), rate_kind(dtype)
    if not peak:
        return None, "no peak"
    generic = generic_ratio(kind, hw.name)
    others = _others(hw.name, kind, True, engine)
    at_clock = [v / p for _, v, p in others if generic is None or v / p >= generic]
    per_joule = [v / o.board_power_w for o, v, p in others
                 if generic is not None and v / p < generic and o.board_power_w]
    if at_clock:
        ratio, why = statistics.median(at_clock), f"median of {len(at_clock)} other fitted GPU(s) at full clock"
    elif generic is not None:
        ratio, why = generic, "the generic ratio" + ("" if others else ", no other GPU's fit to transfer")
    else:
        return None, "none"
    cap = ratio * peak
    if per_joule and hw.board_power_w:
        flop_per_j = statistics.median(per_joule)
        if hw.board_power_w * flop_per_j < cap:
            return hw.board_power_w * flop_per_j, (
                f"{hw.board_power_w:g} W / {1e12 / flop_per_j:.3g} pJ per FLOP: median of {len(per_joule)} other "
                f"power-limited GPU(s); under the {ratio:.3f} x peak full-clock cap, {why}")
    return cap, f"{ratio:.3f} x peak: {why}" + (
        f"; the power term ({len(per_joule)} other power-limited GPU(s)) allows more" if per_joule else "")


def latency_level(hw: HardwareProfile) -> float | None:
    """The latency level ``sources.timing`` cites as fitted on the device's own rows (module doc), else None."""
    m = _LEVEL.search(hw.sources.get("timing", ""))
    return float(m.group(1)) if m and hw.timing is not None and float(m.group(1)) > 0 else None


def latency_held_out(hw: HardwareProfile, engine: tuple[str, str] | None = None) -> HardwareProfile:
    """*hw* without its fitted latency level (with *engine*: only where it was fitted on that (dataset, engine)'s
    rows, :data:`LATENCY_FITS`): ``gemm_latency_s`` and ``stream_latency_s`` divided by it, the derived values;
    the same object when there is none."""
    k = latency_level(hw)
    if k is None or hw.timing is None or (engine is not None and LATENCY_FITS.get(hw.name) != engine):
        return hw
    t = hw.timing
    return replace(hw, timing=replace(t, gemm_latency_s=t.gemm_latency_s / k, stream_latency_s=t.stream_latency_s / k))


def achievable_held_out(hw: HardwareProfile, engine: tuple[str, str] | None = None) -> HardwareProfile:
    """*hw* with each achievable-rate entry fitted on its own rows (with *engine*: on that (dataset, engine)'s rows,
    :data:`RATE_FITS`) replaced by the transferred rate (module doc), and its fitted latency level dropped
    (:func:`latency_held_out`); the same object when none was fitted."""
    hw = latency_held_out(hw, engine)
    own = [d for d in fitted_rates(hw) if engine is None or RATE_FITS.get((hw.name, d)) == engine]
    if not own or hw.timing is None:
        return hw
    table = dict(hw.timing.gemm_achievable_flops_per_s)
    for d in own:
        v, _ = _held_rate(hw, d, engine)
        if v is None:
            del table[d]  # gemm_ceiling's own rule then (twin dtype, the device's bf16 ratio, the peak)
        else:
            table[d] = v
    return replace(hw, timing=replace(hw.timing, gemm_achievable_flops_per_s=table))


def engine_held_profile(hw: HardwareProfile, dataset: str, engine: str) -> HardwareProfile:
    """*hw* for the rows of *engine* in *dataset*: the rates fitted on that engine's rows transferred from the GPUs
    whose rate of the kind was fitted on another engine's rows (else the generic ratio)."""
    return achievable_held_out(hw, (dataset, engine))


def rate_notes(engine: bool = False) -> list[str]:
    """One line per fitted achievable rate: its value and its held-out value (*engine*: for the rows of the engine
    it was fitted on)."""
    out = []
    for hw in list_profiles():
        for d, v in fitted_rates(hw).items():
            fit = RATE_FITS.get((hw.name, d))
            if engine and fit is None:
                continue
            held, how = _held_rate(hw, d, fit if engine else None)
            shown = f"{held / 1e12:.3g}" if held else "dropped"
            on = f" for {fit[0]} {fit[1]} rows" if engine and fit else ""
            out.append(f"{hw.name} {d} {v / 1e12:.3g} -> {shown} TFLOP/s{on} ({how})")
        k, fit = latency_level(hw), LATENCY_FITS.get(hw.name)
        if k is not None and hw.timing is not None and (fit or not engine):
            on = f" for {fit[0]} {fit[1]} rows" if engine and fit else ""
            out.append(f"{hw.name} latency level {k:g} -> 1{on} (gemm / stream latency {hw.timing.gemm_latency_s * 1e6:.3g}"
                       f" / {hw.timing.stream_latency_s * 1e6:.3g} -> {hw.timing.gemm_latency_s / k * 1e6:.3g} / "
                       f"{hw.timing.stream_latency_s / k * 1e6:.3g} us: the derived latencies)")
    return out
