"""``estimate``: TTFT, TPOT, throughput, memory fit and per-layer tables for an LLM on a device.

Token accounting: prefill produces the first output token (``ttft_s``); ``gen - 1`` decode steps produce the
rest (``tpot_s`` is their mean); ``e2e_s = ttft_s + (gen - 1) * tpot_s``; ``output_tokens_per_s =
batch * gen / e2e_s``.  Times are *realistic* by default (the profile's efficiency factors and per-op launch
overhead) with the ideal roofline (100% of peaks, no overhead) beside them; ``ideal=True`` reports the ideal
roofline alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import InputError
from ..frontends.source import GraphSource, LLMSource
from ..graph import OpGraph
from ..hardware.bands import band_for
from ..layers import fold_key, fold_name, layer_row, rollup, scope_at
from .critical import critical_table
from .memfit import memory_of
from .phases import Phase, Pipeline
from .poly import DEGREE, GridPlan, grid_points
from .price import TP_CANDIDATES, figure_row
from .result import LLMConfig, LLMEstimate
from .tables import table_depth
from .tokens import decode_range

__all__ = ["build_estimate", "open_source", "check_lengths", "batches_of", "phases", "plan_grids", "critical_rows",
           "input_text", "TP_CANDIDATES"]


def open_source(model: Any, **opts: Any) -> LLMSource:
    """An :class:`LLMSource` for *model*: a source, an OpGraph (prefill only), a (prefill, decode) pair of
    OpGraphs, or anything :func:`graphroof.llm.loaders.open_model` reads (zoo name, config.json, ONNX,
    ``module:factory``, nn.Module)."""
    if isinstance(model, LLMSource):
        return model
    if isinstance(model, OpGraph):
        return GraphSource(model, None, no_cache_reason="a single graph has no decode step with a KV cache")
    if isinstance(model, tuple) and len(model) == 2 and all(isinstance(g, OpGraph) for g in model):
        return GraphSource(model[0], model[1])
    from ..frontends.sources import open_model

    return open_model(model, **opts)


def batches_of(batch: int | Sequence[int]) -> list[int]:
    bs = [batch] if isinstance(batch, int) else list(batch)
    if not bs:
        raise InputError("--batch needs at least one value, e.g. --batch 1,8,32")
    for b in bs:
        if not isinstance(b, int) or isinstance(b, bool) or b < 1:
            raise InputError(f"--batch values must be integers >= 1, got {b!r}")
    return bs


def check_lengths(prompt: int, gen: int) -> None:
    if not isinstance(prompt, int) or isinstance(prompt, bool) or prompt < 1:
        raise InputError(f"--prompt must be an integer >= 1 (tokens in the prompt), got {prompt!r}")
    if not isinstance(gen, int) or isinstance(gen, bool) or gen < 1:
        raise InputError(f"--gen must be an integer >= 1 (output tokens to generate; the first comes from the "
                         f"prefill), got {gen!r}")


def phases(pipe: Pipeline, b: int, prompt: int, gen: int) -> tuple[Phase, Phase]:
    """The (prefill, decode) breakdowns of batch *b*: per op and per kernel, the mean step (the layer tables)."""
    src = pipe.source
    meta = {"model": src.name}
    prefill = pipe.phase("prefill", "prefill", b, prompt, prompt, 0, meta)
    if src.kv_cache:
        lo, hi = decode_range(src.decode_start(prompt), gen)  # an encoder-decoder: from its decoder prompt
        return prefill, pipe.phase("decode", "decode", b, lo, hi, 1, meta)
    lo, hi = decode_range(prompt, gen, False)
    return prefill, pipe.phase("decode", "prefill", b, lo, hi, 2, meta)


def decode_names(a: Any, depth: int) -> dict[str, str]:
    """Layer name -> the name the decode table shows it under (:func:`graphroof.layers.fold_key`: identical
    blocks folded), so the critical batches line up with the table's rows."""
    rows = [layer_row(g, a.hw, a.totals.t_lower_s) for g in rollup(a.timed_graph, a.hw, depth)]
    return fold_key(rows)


def plan_grids(pipe: Pipeline, batches: Sequence[int], prompt: int, gen: int) -> tuple[int, ...]:
    """Sample the phases on grids (:mod:`graphroof.llm.poly`) whose points are the ones an estimate traces anyway
    (the first batch, and the second batch the critical batch needs): the other batches are interpolated, not
    traced.  Returns the grid's batches."""
    src = pipe.source
    bs = sorted(set(batches))
    b2 = grid_points(bs, 1) if len(bs) > 1 else (bs[0], bs[0] + 1)
    if src.kv_cache:
        pipe.plan_grid("prefill", GridPlan(b2, (prompt,), DEGREE["prefill"]))
        lo, hi = decode_range(src.decode_start(prompt), gen)  # an encoder-decoder decodes from its decoder prompt
        pipe.plan_grid("decode", GridPlan(b2, grid_points({lo, hi}, 1), DEGREE["decode"]))
    elif len(bs) > 1:  # no cache: decode steps are prefill graphs over the decode range
        lo, hi = decode_range(prompt, gen, False)
        pipe.plan_grid("prefill", GridPlan(b2, grid_points({prompt, *range(lo, hi + 1)}, 2), DEGREE["prefill"]))
    return b2


def _floor(pipe: Pipeline, p: Any, b: int) -> float:
    """The realistic decode step's floor from the runtime's host work per sequence at batch *b* (0: ideal)."""
    return 0.0 if p.ideal else float(pipe.runtime.host_per_sequence_s) * b


def critical_rows(pipe: Pipeline, batches: Sequence[int], prompt: int, b: int, key: Callable,
                  memo: dict) -> list[dict]:
    """The critical batch per layer at batch *b*: costs are affine in the batch, so any two counted batches give
    the line (the grid's two batches when it has them)."""
    src = pipe.source
    phase, x = ("decode", src.decode_start(prompt)) if src.kv_cache else ("prefill", prompt + 1)
    other = next((o for o in batches if o != b), b + 1)
    b1, b2 = sorted((b, other))
    plan = pipe.plans.get(phase)
    if plan is not None and len(plan.bs) == 2 and x in plan.xs:
        b1, b2 = plan.bs  # the same line through two traced batches
    mkey = (phase, b1, b2, x)
    if mkey not in memo:  # the same two batches serve every configuration of a grid
        ops1 = pipe.counted(phase, b1, x).ops
        ops2 = pipe.counted(phase, b2, x).ops
        memo[mkey] = critical_table(ops1, ops2, b1, b2, pipe.hw, key)
    return [dict(r) for r in memo[mkey]]


def build_estimate(eng: Any, prompt: int, gen: int, batch: int | Sequence[int]) -> LLMEstimate:
    """:meth:`Engine.estimate`: the configurations at each batch, priced by the engine's evaluator, with their
    per-op breakdowns, memory fits, critical batches and next steps."""
    check_lengths(prompt, gen)
    batches = batches_of(batch)
    p, pipe, src, prof = eng.pricing, eng.pipeline, eng.source, eng.hw
    src.check_context(prompt, gen)
    if not eng.layout.plain:
        return parallel_estimate(eng, prompt, gen, batches)
    b2 = plan_grids(pipe, batches, prompt, gen)
    # one batch: priced from its own traces (the grid's second batch only serves the critical batch's line)
    spec = getattr(eng, "spec", None)  # speculative decoding: the verify step extrapolates along the batch
    priced = eng.priced(batches, [prompt], [gen], grid_batches=b2 if len(set(batches)) > 1 or spec else None)
    serving = p.serving
    figs = priced.price(prof, batches, prompt, gen, ideal=p.ideal, serving=serving, spec=spec)
    memo: dict = {}
    configs = []
    for i, b in enumerate(batches):
        prefill, decode = phases(pipe, b, prompt, gen)
        d = p.depth or table_depth(decode.analysis)

        shown = decode_names(decode.analysis, d) if p.fold else {}

        def key(op, d=d, shown=shown):  # the name the layer table shows the op's layer under
            s = scope_at(op.scope, d)
            return shown.get(s, fold_name(s))

        configs.append(LLMConfig(batch=b, prompt=prompt, gen=gen, tp=p.tp, prefill=prefill, decode=decode,
                                 memory=memory_of(priced, figs.memory, b, prompt, i, serving),
                                 figures=figure_row(figs, i, _floor(pipe, p, b)),
                                 critical=critical_rows(pipe, batches, prompt, b, key,
                                                                                      memo),
                                 table_depth=d, fold=p.fold, ideal=p.ideal))
    notes = eng.notes()
    for c in configs:
        for n in c.prefill.notes + c.decode.notes + pipe.poly_notes + figs.notes:
            if n not in notes:
                notes.append(n)
    from .advice import llm_advice  # the next steps: computed once, here, and stored on the estimate

    est = LLMEstimate(model=src.name, hw=prof, prompt=prompt, gen=gen, tp=p.tp, quant=p.quant, ideal=p.ideal,
                      kv_cache=src.kv_cache, spec=src.spec, configs=configs, notes=notes, settings=p.settings,
                      input=input_text(src, prompt))
    attach_bands(est, pipe.runtime.name)
    if spec is None:
        est.next_steps = llm_advice(est, pipe)
    else:  # the what-ifs price plain decoding: their figures would not compare with the speculative TPOT
        est.notes.append("next steps are not computed under speculative decoding (their what-ifs price plain "
                         "decoding)")
    return est


def attach_bands(est: LLMEstimate, runtime: str) -> None:
    """Each configuration's error bands (TTFT, TPOT, throughput) from the validation table of the regime: the
    device (its vendor) and the runtime preset (:mod:`graphroof.hardware.bands`); none for the ideal roofline."""
    est.runtime = runtime
    if est.ideal:
        return
    hw = est.hw
    bands = {k: band_for(k, hw.name, hw.vendor, runtime) for k in ("ttft", "tpot", "throughput")}
    for c in est.configs:
        c.bands = dict(bands)


def input_text(src: Any, prompt: int) -> str:
    """What the prefill reads, in words: ``prompt 1024 tokens``; an encoder-decoder's encoder input (Whisper:
    ``audio: 3000 log-mel frames (1500 encoder positions)``) and decoder prompt."""
    if not getattr(src, "encoder_decoder", False):
        return f"prompt {prompt} tokens"
    dp = getattr(src, "decoder_prompt", 1)
    feats = getattr(src, "features", None)
    dec = f"decoder prompt {dp} token{'s' if dp != 1 else ''}"
    if feats:
        enc = getattr(src, "encoder_len", None)
        pos = f" ({enc} encoder positions)" if enc else ""
        return f"audio: {feats[1]} log-mel frames of {feats[0]} bins{pos}, {dec}"
    return f"encoder input {prompt} tokens, {dec}"


def parallel_estimate(eng: Any, prompt: int, gen: int, batches: list[int]) -> LLMEstimate:
    """:meth:`Engine.estimate` under a parallel layout: the figures of :func:`graphroof.llm.pp.parallel_figures`;
    the breakdown tables are one rank's step of the last stage (it runs the LM head) at its micro-batch (prefill:
    ``ceil(b_dp / m)`` sequences, decode: ``ceil(b_dp / pp)``); no critical batches, no next steps (their what-ifs
    price a plain replica)."""
    p, src, prof, lay = eng.pricing, eng.source, eng.hw, eng.layout
    last = eng.pipeline.stage_view(lay.pp - 1)
    b_dp = [-(-b // lay.dp) for b in batches]
    b_pre = [-(-d // min(d, lay.microbatches or lay.pp)) for d in b_dp]
    b_dec = [-(-d // lay.pp) for d in b_dp]
    plan_grids(last, sorted(set(b_pre + b_dec + b_dp)), prompt, gen)
    figs = eng.price(batches, prompt, gen)
    meta = {"model": src.name}
    configs = []
    for i, b in enumerate(batches):
        prefill = last.phase("prefill", "prefill", b_pre[i], prompt, prompt, 0, meta)
        if src.kv_cache:
            lo, hi = decode_range(src.decode_start(prompt), gen)
            decode = last.phase("decode", "decode", b_dec[i], lo, hi, 1, meta)
        else:
            lo, hi = decode_range(prompt, gen, False)
            decode = last.phase("decode", "prefill", b_dec[i], lo, hi, 2, meta)
        d = p.depth or table_depth(decode.analysis)
        configs.append(LLMConfig(batch=b, prompt=prompt, gen=gen, tp=p.tp, prefill=prefill, decode=decode,
                                 memory=memory_of(None, figs.memory, b_dp[i], prompt, i, p.serving, min_tp=False),
                                 figures=figure_row(figs, i, _floor(eng.pipeline, p, int(b_dec[i]))), critical=[],
                                 table_depth=d, fold=p.fold,
                                 ideal=p.ideal, layout=lay.to_dict()))
    notes = eng.notes()
    for c in configs:
        for n in c.prefill.notes + c.decode.notes + last.poly_notes + figs.notes:
            if n not in notes:
                notes.append(n)
    notes.append(f"breakdown tables: one rank of the last pipeline stage (of {lay.pp}) at its micro-batch; no next "
                 "steps or critical batches under a parallel layout")
    est = LLMEstimate(model=src.name, hw=prof, prompt=prompt, gen=gen, tp=p.tp, quant=p.quant, ideal=p.ideal,
                      kv_cache=src.kv_cache, spec=src.spec, configs=configs, notes=notes, settings=p.settings,
                      input=input_text(src, prompt), layout=lay.to_dict())
    attach_bands(est, eng.pipeline.runtime.name)
    return est
