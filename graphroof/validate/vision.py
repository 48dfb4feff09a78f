"""Vision and encoder rows (``vision_encoder.csv``) priced by :func:`graphroof.analyze` of the zoo model:
``analyze(model, hw, runtime, batch, dtype[, seq])``, its realistic time per batch.

* runtime: the engine's preset: ``tensorrt`` for TensorRT, ``paddle-tensorrt`` for Paddle + TensorRT (TensorRT's
  kernels plus each predictor call's host work), ``fastertransformer`` for
  FasterTransformer (hand-fused BERT kernels launched from its C++ op), ``pytorch-eager`` for PyTorch eager and
  TorchScript, ``tf-xla`` for TensorFlow + XLA (the generic ``compiled`` / ``eager`` where a preset is absent);
* dtype: ``fp16`` for fp16 / AMP rows, ``fp32`` for fp32 and TF32 rows (fp32 matmuls run on TF32 units where the
  device has them: analyze's default matmul precision; FasterTransformer's docs' fp32 rows are FP32 math:
  ``--matmul-precision highest``); int8 engines are not covered (analyze prices a model dtype, not a calibrated
  int8 engine);
* attention: fused (``flash``), or ``--attention naive`` (scores in memory) where the engine has no fused kernel:
  TorchScript / TF + XLA BERT of FT's docs, TensorRT / FT on Volta (:func:`_kernels`);
* FasterTransformer's docs' rows run as their benchmarks ran: an unfused attention adds the ``[b, 1, s, s]`` mask
  the benchmark passes (:func:`_with_mask`), TorchScript's linears add their bias in a kernel of their own as
  PyTorch 1.8 ran them (:func:`_with_bias_add`), FT's PyTorch op runs its Python wrapper's ATen ops on the host
  before its first kernel (:data:`FT_PYTORCH_PREP_OPS`), and the host dispatch is that of the GPU's own host CPU,
  named by the docs (:data:`FT_HOSTS`);
* measured: the published mean latency of one batch, else the median, else batch / throughput (a rate);
* rows without a zoo model, without a profile, or with a ``?`` mapping are reported as not covered.

A model asked for at many batch sizes (and sequence lengths) is traced at a few of them (the smallest and largest
batch, and sequence) and its graph at the others interpolated from those, exactly the graph a trace gives there
(:mod:`graphroof.validate.traces`: checked against one more trace, else every point is traced); each graph is then
counted and priced per device by :func:`graphroof.api.analyze_on_profiles`, as ``analyze`` does.
"""

from __future__ import annotations

import re
from typing import Any

from ..options import DEFAULT
from .context import Context, preset
from .data import DATA_DIR, excluded_reason, profile_or_none
from .result import Row

__all__ = ["vision_rows"]


def _runtime(framework: str) -> str:
    """The runtime preset of the engine that measured the row (graphroof/fuse/presets), or the generic one."""
    f = framework.lower()
    if "eager" in f or "torchscript" in f:
        return preset("pytorch-eager", "eager")
    if "fastertransformer" in f:  # FT's fused BERT kernels, launched one by one from its C++ op (host per kernel)
        return preset("fastertransformer", "tensorrt")
    if "paddle" in f and "tensorrt" in f:  # TensorRT kernels, timed per Paddle predictor call from Python
        return preset("paddle-tensorrt", "tensorrt")
    if "tensorrt" in f:           # TensorRT: one enqueue per engine
        return preset("tensorrt", "compiled")
    if "xla" in f:                # TensorFlow + XLA: XLA's kernels issued by the TF executor ahead of the device
        return preset("tf-xla", "compiled")
    return "compiled"


def _dtype(precision: str) -> str | None:
    p = precision.lower()
    if "int8" in p:
        return None
    if "fp16" in p:
        return "fp16"
    if p in ("fp32", "tf32"):
        return "fp32"
    return None


#: profiles of GPUs for which TensorRT's BERT plugin has no fused multi-head attention kernel:
#: NVIDIA/TensorRT plugin/bertQKVToContextPlugin/fused_multihead_attention ships cubins for sm75, sm80, sm86, sm87,
#: sm89/90, sm100, sm120 only; on Volta (sm70) it runs the unfused path (batched GEMMs and a softmax over the score
#: matrix in memory).  FasterTransformer v4 is priced the same way on Volta although it ships sm70 fp16 fused
#: kernels of its own (open_attention.h, trt_fused_multihead_attention/*v2*.sm70.cpp, NVIDIA/FasterTransformer
#: v4.0): an approximation kept because pricing them as fused moved its V100 rows 1-14 points further from the
#: measurements (batch 32 seq 384: -12 -> -26%); its other kernels (bias + GELU and the QKV bias apart, 9 kernels
#: a layer against the 7 priced) are not modelled either
NO_FUSED_MHA = ("v100",)


def _kernels(source_id: str, framework: str, dtype: str | None, prof: str = "") -> tuple[str, str]:
    """(attention, matmul precision) of the row's engine.  Attention: FasterTransformer's docs time TorchScript and
    TF + XLA BERT of their era, whose attention is matmul - softmax - matmul with the score matrix in memory (PyTorch
    1.x has no scaled_dot_product_attention, XLA does not emit a fused kernel), and TensorRT / FT on a GPU without
    their fused MHA kernels (:data:`NO_FUSED_MHA`) run the same unfused path: ``naive``; else fused: ``flash``.
    Matmul precision: FT's docs' "fp32" rows are FP32 math (cuBLAS's default math mode; their A10 fp32 rates,
    ~10 TFLOP/s, are below the 31 TFLOP/s fp32 peak, far below TF32's 62.5): ``highest``; every other fp32 row
    keeps analyze's default (TF32 where the device has it)."""
    f = framework.lower()
    ft_doc = source_id.startswith("FT_BERT")
    unfused = (ft_doc and ("torchscript" in f or "xla" in f)) or (
        ("tensorrt" in f or "fastertransformer" in f) and prof.startswith(NO_FUSED_MHA))
    return "naive" if unfused else "flash", "highest" if ft_doc and dtype == "fp32" else "high"


#: the host CPU of each GPU that FasterTransformer's docs benchmark on ("Hardware settings", NVIDIA/FasterTransformer
#: @df4a753 docs/bert_guide.md#L1033-L1036: "the CPU may affect the performance when the batch size and sequence
#: length are small") and its host dispatch time relative to the V100's DGX-1 host, the level the fastertransformer
#: and tf-xla presets' host constants sit at (their fits: V100 rows) and :data:`PYTORCH18_HOST` measures the
#: TorchScript rows from.  Fitted (one factor per host, two rows each): the mean of that host's two host-bound
#: TorchScript rows, batch 1 seq 32 fp32 / fp16 (T4: bert_guide.md#L1482 / #L1496, 11.51 / 11.04 ms; A10: #L1424 /
#: #L1438, 3.98 / 4.20 ms), over the V100's (#L1540 / #L1554, 6.91 / 6.66 ms): 11.275 / 6.785 = 1.662 and
#: 4.09 / 6.785 = 0.603.  The other rows of those hosts are checks.  Both hold-outs drop the factor (1: the reference
#: host): it was fitted on the GPU's own rows, and on the TorchScript engine's.
FT_HOSTS: dict[str, tuple[str, float]] = {
    "v100-sxm2-32gb": ("Intel Xeon E5-2698 v4 @ 2.20GHz (DGX-1)", 1.0),
    "t4-16gb-pcie": ("Intel Xeon E5-2670 @ 2.60GHz", 1.662),
    "a10-24gb-pcie": ("AMD EPYC 7232P 8-core", 0.603),
}

#: PyTorch 1.8's eager / TorchScript dispatch on the FT docs' DGX-1 host (the V100's), relative to the pytorch-eager
#: preset's level, which is PyTorch 2.11 on the 2026 hosts graphroof measured (its [sources]).  Fitted on the six
#: batch-1 seq-32 TorchScript rows, the rows that set the preset's level before: their median 6.785 ms over the
#: preset's host time of graphroof's BERT-base encoder under naive attention (237 launches, 97 library calls:
#: 237 x (5 + 9) + 97 x 24 us = 5.646 ms) = 1.20.  It scales the TorchScript rows' whole dispatch (with
#: :data:`FT_HOSTS` for their host) and the FT PyTorch op's wrapper ops (:data:`FT_PYTORCH_PREP_OPS`, PyTorch 1.8 too).
#: The TorchScript engine hold-out drops it (1: the PyTorch 2.11 level), with the FT_HOSTS factors.
PYTORCH18_HOST = 1.20


def _host_factor(source_id: str, prof: str, framework: str = "") -> float:
    """The row's host dispatch time relative to the reference host (:data:`FT_HOSTS`; 1 where the source names
    no host): every engine of the docs on that host (TorchScript, FT's PyTorch and TF ops, TF + XLA), and for the
    TorchScript rows also PyTorch 1.8 against the pytorch-eager level (:data:`PYTORCH18_HOST`)."""
    if not source_id.startswith("FT_BERT"):
        return 1.0
    host = FT_HOSTS.get(prof, ("", 1.0))[1]
    return host * PYTORCH18_HOST if "torchscript" in framework.lower() else host


#: ATen ops the FasterTransformer PyTorch op's Python wrapper runs per forward before its first layer, as the
#: docs' PyTorch benchmark ran it (NVIDIA/FasterTransformer@0280a66 sample/pytorch/encoder_sample.py times the
#: torch.jit.script'ed ``CustomEncoder``; sample/pytorch/utils/encoder.py#L188-L198, the path without remove-padding):
#: ``torch.tensor(0, device='cuda')`` and ``torch.tensor([batch * max_seq_len], device='cuda')`` (2 host-to-device
#: copies of pageable memory, each followed by a stream synchronisation: PyTorch's blocking ``copy_``), the first
#: one's ``.to(torch.int32)``, ``torch.arange``, the ``sequence_lengths + padding_offset`` add, two ``torch.cat``, the
#: reshape of the transposed offsets (a copy) and the final ``.to(torch.int32)``: 9 ops that launch work (the
#: ``.to(trt_seq_len.dtype)`` of an int64 tensor to int64 launches nothing).  The first copy's sync waits for the
#: previous forward's layers, so these ops run while the device idles: host time before the first kernel (the
#: preset's ``call_overhead_s`` stage), each one eager ATen dispatch at the pytorch-eager preset's host cost.  The
#: TF op (a graph op per layer, its offsets an input tensor) has no such wrapper.
FT_PYTORCH_PREP_OPS = 9


def _prep_ops(source_id: str, framework: str) -> int:
    """ATen ops the row's engine runs on the host before its first kernel (:data:`FT_PYTORCH_PREP_OPS` for the FT
    docs' PyTorch-op rows, else 0)."""
    f = framework.lower()
    ft_pt = source_id.startswith("FT_BERT") and "fastertransformer" in f and "pytorch" in f
    return FT_PYTORCH_PREP_OPS if ft_pt else 0


def _host_runtime(runtime: str, factor: float, launch_s: float, prep_ops: int = 0) -> Any:
    """*runtime*'s preset with its host dispatch (the profile's launch plus the preset's per-kernel and per-library
    call host time: :mod:`graphroof.timing.host`) scaled by *factor*, and *prep_ops* eager ATen ops of host work
    before its first kernel (:func:`_prep_ops`: ``call_overhead_s`` += *factor* x :data:`PYTORCH18_HOST` x
    *prep_ops* x (*launch_s* + the pytorch-eager preset's ``host_overhead_per_kernel_s``): PyTorch 1.8 ATen ops);
    the preset's name where nothing changes (no host stage; factor 1 and no prep; the factor is also dropped while
    the engine hold-out holds the preset's own constants out, which holds the factor out with them)."""
    from dataclasses import replace

    from ..fuse import runtimes

    rt = runtimes.get_runtime(runtime)
    # the engine hold-out's pass over the TorchScript rows swaps the eager preset for its held-out constants
    # (.holdout_engine.held_out_runtimes): the factors, fitted on the same rows, are held out with them
    eager = runtimes.RUNTIMES.get("pytorch-eager")
    held = eager is not runtimes._builtin().get("pytorch-eager")
    if held:
        factor = 1.0
    if not rt.overlap_launch or (factor == 1.0 and not prep_ops):
        return runtime
    out = rt if factor == 1.0 else replace(
        rt, host_overhead_per_kernel_s=factor * (launch_s + rt.host_overhead_per_kernel_s) - launch_s,
        host_overhead_per_library_call_s=factor * rt.host_overhead_per_library_call_s)
    if prep_ops and eager is not None:
        prep_s = factor * PYTORCH18_HOST * prep_ops * (launch_s + eager.host_overhead_per_kernel_s)
        out = replace(out, call_overhead_s=out.call_overhead_s + prep_s)
    return out


def _with_mask(graph: Any, batch: int, seq: int) -> Any:
    """*graph* with a ``[batch, 1, seq, seq]`` mask added to the scores of every attention, as FasterTransformer's
    benchmarks run the encoder: bert_example.py (PyTorch) passes ``sequence_mask(mem_seq_lens, seq_len, False)``,
    ``[b, 1, s, s]``, which the HF encoder turns into ``(1 - mask) * -10000`` and adds in every layer; the TF
    model adds ``build_sequence_mask(...)``, ``[b, 1, s, s]`` (examples/tensorflow/bert/utils/bert.py).  Counted as
    ATen's ``attn_mask``: read once, one add per score; under PyTorch eager one more kernel (graphroof.timing.host)."""
    from dataclasses import replace

    from ..graph import IN_TENSORS, TensorSpec

    def masked(node: Any) -> Any:
        if node.op != "aten.scaled_dot_product_attention" or node.input(3) is not None:
            return node
        mask = TensorSpec((batch, 1, seq, seq), node.inputs[0].dtype)
        return replace(node, inputs=(*node.inputs[:3], mask, *node.inputs[4:]))

    out = graph.map_ops(masked)
    for node in out:  # the mask is a named model input, so each attention kernel reads it (fuse.group.boundary)
        if node.op == "aten.scaled_dot_product_attention":
            names = tuple(out.get(node.name, IN_TENSORS) or ())
            out.set(node.name, IN_TENSORS, (*names[:3], "attention_mask", *names[4:]))
    return out


def _with_bias_add(graph: Any) -> Any:
    """*graph* with the bias of every linear on a 3-D input added by a kernel of its own, as the PyTorch of
    FasterTransformer's TorchScript rows ran it: ``at::linear`` (torch.nn.functional.linear up to 1.7) takes
    ``addmm`` (the bias in the GEMM) only for a 2-D input, else ``matmul`` then ``output.add_(bias)`` (PyTorch
    1.5-1.10; later releases fold a contiguous 3-D input into addmm).  The guide's T4 / V100 / A10 tables date from FT
    v4.0-v5.0 (NVIDIA/FasterTransformer@0280a66, 2021-04: docs/encoder_guide.md; @952a1f2, 2021-09), whose docs
    name the NGC images up to pytorch:20.12-py3, PyTorch 1.8.0 ("Verify on 1.8.0").  Marked on the node
    (:data:`graphroof.timing.host.BIAS_ADD`): one more kernel on the device with its bytes, launched inside the
    one linear op (no host dispatch of its own)."""
    from dataclasses import replace

    from ..timing.host import BIAS_ADD

    def split(node: Any) -> Any:
        x = node.inputs[0] if node.inputs else None
        if node.op != "aten.linear" or len(node.inputs) < 3 or node.inputs[2] is None or x is None or x.rank < 3:
            return node
        return replace(node, attrs={**node.attrs, BIAS_ADD: "separate"})

    return graph.map_ops(split)


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


def _short(target: str) -> str:
    return target.split("/")[-2] if "/" in target else target


def _graphs(ctx: Context, target: str, dtype: str, points: set[tuple]) -> dict[tuple, Any]:
    """*target*'s graph at every ``(batch, seq)`` of *points* (:func:`graphroof.validate.traces.graphs_at`: a few
    traces where the dependence on the batch and the sequence checks linear), each as ``load(target, batch=B,
    dtype, seq)`` gives it."""
    from ..frontends import load
    from .traces import graphs_at

    def trace(b: int, s: int | None) -> Any:
        return load(target, options=ctx.options or DEFAULT, batch=b, dtype=dtype, **({"seq": s} if s else {}))

    ctx.progress(f"tracing {_short(target)}, {dtype}: {len(points)} (batch, seq) points")
    out, n = graphs_at(trace, points, ctx.progress)
    if n < len(out):
        ctx.progress(f"{_short(target)}, {dtype}: {n} traces; the other {len(out) - n} graphs interpolated from them "
                     "(checked against one more trace)")
    return out


def vision_rows(ctx: Context) -> list[Row]:
    from ..api import analyze_on_profiles
    from ..timing.profile import timing_of

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
            att, mp = _kernels(r["source_id"], r["framework"], dtype, prof)
            host = _host_factor(r["source_id"], prof, r["framework"])
            # the GPU hold-out's host: the source's era (PYTORCH18_HOST), not the GPU's own host (FT_HOSTS)
            host_held = _host_factor(r["source_id"], "", r["framework"])
            prep = _prep_ops(r["source_id"], r["framework"])  # the FT PyTorch op's wrapper ops (host, serial)
            mask = bool(seq) and att == "naive" and r["source_id"].startswith("FT_BERT")  # scores + mask: _with_mask
            bias = mask and "torchscript" in r["framework"].lower()  # PyTorch 1.8's linear: _with_bias_add
            job = (target, (runtime, att, mp, host, host_held, mask, bias, prep), batch, seq, dtype)
            jobs.setdefault(job, []).append((row, prof))
            row.vendor = hw.vendor
            row.command = (f"graphroof analyze {target} --hw {prof} --runtime {runtime} --batch {batch} --dtype {dtype}"
                           + (f" --seq {seq}" if seq else "") + (" --attention naive" if att == "naive" else "")
                           + (" --matmul-precision highest" if mp == "highest" else "") + " -f json: totals time_realistic_s"
                           + (" (throughput = batch / time)" if is_rate else "")
                           + (f"; host dispatch x {host:g} (the source's host CPU and PyTorch: "
                              "graphroof.validate.vision.FT_HOSTS, PYTORCH18_HOST)" if host != 1.0 else "")
                           + ("; linear biases added apart (PyTorch 1.8: graphroof.validate.vision._with_bias_add)"
                              if bias else "")
                           + (f"; {prep} ATen ops of the op's Python wrapper before the first kernel "
                              "(graphroof.validate.vision.FT_PYTORCH_PREP_OPS)" if prep else ""))
        out.append(row)
    models: dict[tuple, set[tuple]] = {}  # (target, dtype) -> the (batch, seq) its rows ask for
    for target, _, batch, seq, dtype in jobs:
        models.setdefault((target, dtype), set()).add((batch, seq))
    graphs: dict[tuple, dict[tuple, Any]] = {}
    order = {m: i for i, m in enumerate(models)}  # one model after the other, in the order of the data
    for (target, (runtime, att, mp, host, host_held, mask, bias, prep), batch, seq, dtype), rows_ in sorted(
            jobs.items(), key=lambda j: order[j[0][0], j[0][4]]):
        if (target, dtype) not in graphs:  # one model's graphs at a time (the previous one's are dropped)
            graphs = {(target, dtype): _graphs(ctx, target, dtype, models[target, dtype])}
        graph = graphs[target, dtype][batch, seq]
        if mask:
            graph = _with_mask(graph, batch, seq)
        if bias:
            graph = _with_bias_add(graph)
        profs = sorted({p for _, p in rows_})
        hws: list[Any] = [ctx.hw(p) for p in profs]
        held = [ctx.holdout_hw(p, "vision") for p in profs]
        held = [h if h is not None and h is not ctx.hw(p) else None for p, h in zip(profs, held)]
        if host != host_held and ctx.holdout == "gpu":  # the host factor was fitted on the GPU's rows: held out too
            held = [h if h is not None else ctx.hw(p) for p, h in zip(profs, held)]
        helds = [h for h in held if h is not None]
        if mp != "high":  # the engine's fp32 matmul math (see _kernels)
            hws = [h.with_overrides(matmul_precision=mp) for h in hws]
            helds = [h.with_overrides(matmul_precision=mp) for h in helds]
        ctx.progress(f"vision {_short(target)}: batch {batch}" + (f", seq {seq}" if seq else "")
                     + f", {dtype}, {runtime} on {', '.join(profs)}")
        # the model's graph at the row's batch (traced, or interpolated and checked: .traces), counted and priced
        # per device (graphroof compare's path; = analyze per device), the host of the row's source (FT_HOSTS)
        launch_s = timing_of(hws[0]).launch_overhead_s
        rt = _host_runtime(runtime, host, launch_s, prep)
        if rt == runtime:
            ts = [a.time_realistic_s for a in analyze_on_profiles(graph, hws + helds, runtime=runtime, attention=att)]
        else:  # the held-out figures on the reference host (its wrapper ops kept; the source's era kept)
            ts = [a.time_realistic_s for a in analyze_on_profiles(graph, hws, runtime=rt, attention=att)]
            ts += [a.time_realistic_s for a in analyze_on_profiles(graph, helds, runtime=_host_runtime(
                runtime, host_held, launch_s, prep), attention=att)]
        t_of = dict(zip(profs, ts[:len(profs)]))
        th_of = dict(zip([p for p, h in zip(profs, held) if h is not None], ts[len(profs):]))
        for row, prof in rows_:
            t = t_of[prof]
            row.predicted = batch / t if row.is_rate else t
            if ctx.holdout:
                th = th_of.get(prof, t)  # nothing fitted on the held-out group: the plain figure
                row.holdout[ctx.holdout] = batch / th if row.is_rate else th
    return out
