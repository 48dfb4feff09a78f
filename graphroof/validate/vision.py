"""Vision and encoder rows (``vision_encoder.csv``) priced by :func:`graphroof.analyze` of the zoo model:
``analyze(model, hw, runtime, batch, dtype[, seq])``, its realistic time per batch.

* runtime: the engine's preset: ``tensorrt`` for TensorRT, Paddle + TensorRT and FasterTransformer (hand-fused
  BERT kernels), ``pytorch-eager`` for PyTorch eager and TorchScript, ``compiled`` for TensorFlow + XLA (the
  generic ``compiled`` / ``eager`` where a preset is absent);
* dtype: ``fp16`` for fp16 / AMP rows, ``fp32`` for fp32 and TF32 rows (fp32 matmuls run on TF32 units where the
  device has them: analyze's default matmul precision); int8 engines are not covered (analyze prices a model
  dtype, not a calibrated int8 engine);
* measured: the published mean latency of one batch, else the median, else batch / throughput (a rate);
* rows without a zoo model, without a profile, or with a ``?`` mapping are reported as not covered.
"""

from __future__ import annotations

import re
from typing import Any

from .context import Context, preset
from .data import DATA_DIR, excluded_reason, profile_or_none
from .result import Row

__all__ = ["vision_rows"]


def _runtime(framework: str) -> str:
    """The runtime preset of the engine that measured the row (graphroof/fuse/presets), or the generic one."""
    f = framework.lower()
    if "eager" in f or "torchscript" in f:
        return preset("pytorch-eager", "eager")
    if "tensorrt" in f or "fastertransformer" in f:  # TensorRT, Paddle + TensorRT, FT's fused BERT kernels
        return preset("tensorrt", "compiled")
    return "compiled"                                 # TensorFlow + XLA


def _dtype(precision: str) -> str | None:
    p = precision.lower()
    if "int8" in p:
        return None
    if "fp16" in p:
        return "fp16"
    if p in ("fp32", "tf32"):
        return "fp32"
    return None


def _engine(framework: str) -> str:
    return re.split(r"[(;\[]", framework, maxsplit=1)[0].strip()


#: GPUs the data names without a profile mapping, that have exactly one variant (one profile)
GPU_NAMES = {"A30": "a30-24gb-pcie"}


def _by_name(gpu: str) -> str:
    """The profile of a GPU named in the row whose mapping column is empty, where the name is unambiguous."""
    for word, prof in GPU_NAMES.items():
        if re.search(rf"\b{word}\b", gpu):
            return prof
    return ""


def _target(source_id: str, model: str) -> str:
    """What analyze is given for the row's model: the SQuAD-head BERT the TensorRT demo runs, the head-less
    encoder FasterTransformer times (configs in data/models, see data/README.md), else the zoo name."""
    if model in ("bert-base", "bert-large") and source_id.startswith("TRT_DEMO_BERT"):
        return str(DATA_DIR / "models" / f"{model}-squad" / "config.json")
    if model == "bert-base" and source_id.startswith("FT_BERT"):
        return str(DATA_DIR / "models" / "bert-base-encoder" / "config.json")
    return model


def vision_rows(ctx: Context) -> list[Row]:
    from ..api import analyze_on_profiles

    jobs: dict[tuple, list[tuple[Row, str]]] = {}
    out: list[Row] = []
    rows = ctx.rows("vision_encoder.csv")
    for where, r in rows:
        raw_model, prof = r["graphroof_model"], r["graphroof_hw"] or _by_name(r["gpu"])
        model = raw_model.split("(")[0].strip()
        batch = int(r["batch_size"])
        seq = int(r["seq_len"]) if r["seq_len"] else None
        runtime, dtype = _runtime(r["framework"]), _dtype(r["precision"])
        lat = r["latency_avg_ms"] or r["latency_p50_ms"]
        if lat:
            meas, is_rate, metric, unit = float(lat) * 1e-3, False, "latency per batch", "s"
        elif r["throughput_per_s"]:
            meas, is_rate, metric, unit = float(r["throughput_per_s"]), True, "throughput", r["throughput_unit"]
        else:
            meas, is_rate, metric, unit = float("nan"), False, "none", ""
        small = "small batch (<= 8)" if batch <= 8 else "large batch (> 8)"
        inputs = {"model": model or r["model"], "batch": batch, "seq": seq, "image_size": r["image_size"],
                  "precision": r["precision"], "framework": r["framework"], "gpu": r["gpu"]}
        row = Row("vision", where, _engine(r["framework"]), prof, "", model or r["model"], small,
                  "vision-latency" if not seq else "encoder-latency", runtime, metric, unit, inputs, meas,
                  is_rate=is_rate)
        row.excluded = excluded_reason("vision", r, ctx.rules)
        hw = ctx.hw(prof) if prof and "?" not in prof and profile_or_none(prof) is not None else None
        if not model or "?" in raw_model:
            row.not_covered = f"no zoo model mapped for {r['model']!r}" if not model else \
                f"uncertain model mapping {raw_model!r}"
        elif not prof or "?" in prof:
            row.not_covered = f"no hardware profile for {r['gpu']!r}" if not prof else \
                f"uncertain profile mapping {prof!r}"
        elif hw is None:
            row.not_covered = f"no hardware profile {prof!r} yet"
        elif dtype is None:
            row.not_covered = f"precision {r['precision']!r}: a calibrated int8 engine, not a model dtype analyze prices"
        elif r["image_size"] and r["image_size"] != "224":
            row.not_covered = f"image size {r['image_size']}: the zoo model is built for 224x224"
        elif meas != meas:
            row.not_covered = "no latency or throughput in the row"
        if hw is not None and not row.excluded and not row.not_covered:
            target = _target(r["source_id"], model)
            jobs.setdefault((target, runtime, batch, seq, dtype), []).append((row, prof))
            row.vendor = hw.vendor
            row.command = (f"graphroof analyze {target} --hw {prof} --runtime {runtime} --batch {batch} --dtype {dtype}"
                           + (f" --seq {seq}" if seq else "") + " -f json: totals time_realistic_s"
                           + (" (throughput = batch / time)" if is_rate else ""))
        out.append(row)
    for (target, runtime, batch, seq, dtype), rows_ in jobs.items():
        profs = sorted({p for _, p in rows_})
        hws: list[Any] = [ctx.hw(p) for p in profs]
        held = [ctx.holdout_hw(p, "vision") for p in profs]
        held = [h if h is not None and h is not ctx.hw(p) else None for p, h in zip(profs, held)]
        hws += [h for h in held if h is not None]
        ctx.progress(f"vision {target.split('/')[-2] if '/' in target else target}: batch {batch}"
                     + (f", seq {seq}" if seq else "") + f", {dtype}, {runtime} on {', '.join(profs)}")
        kw: dict[str, Any] = {"batch": batch, "dtype": dtype}
        if seq:
            kw["seq"] = seq
        # the model traced once, counted and priced per device (graphroof compare's path; = analyze per device)
        ts = [a.time_realistic_s for a in analyze_on_profiles(target, hws, runtime=runtime, options=ctx.options, **kw)]
        t_of = dict(zip(profs, ts[:len(profs)]))
        th_of = dict(zip([p for p, h in zip(profs, held) if h is not None], ts[len(profs):]))
        for row, prof in rows_:
            t = t_of[prof]
            row.predicted = batch / t if row.is_rate else t
            if ctx.holdout:
                th = th_of.get(prof, t)  # nothing fitted on the held-out group: the plain figure
                row.holdout[ctx.holdout] = batch / th if row.is_rate else th
    return out
