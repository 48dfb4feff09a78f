"""``estimate``: TTFT, TPOT, throughput, memory fit and per-layer tables for an LLM on a device.

Token accounting: prefill produces the first output token (``ttft_s``); ``gen - 1`` decode steps produce the
rest (``tpot_s`` is their mean); ``e2e_s = ttft_s + (gen - 1) * tpot_s``; ``output_tokens_per_s =
batch * gen / e2e_s``.  Times are *realistic* by default (the profile's efficiency factors and per-op launch
overhead) with the ideal roofline (100% of peaks, no overhead) beside them; ``ideal=True`` reports the ideal
roofline alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..counters.registry import Rule
from ..counters.rules.ssm import STATE_OPS
from ..counters.settings import CountSettings
from ..dtypes import dtype_bits
from ..errors import GraphroofError, InputError
from ..errors import warn as warn_user
from ..fuse import get_runtime
from ..graph import OpGraph
from ..hardware import HardwareProfile
from ..layers import scope_at
from .critical import critical_table
from .kvcache import APPEND
from .memory import (
    MemoryFit,
    ServingMemory,
    activation_peak_bytes,
    max_concurrent,
    params_from_graph,
    resident_weight_bytes,
)
from .phases import Pipeline
from .poly import DEGREE, GridPlan, grid_points
from .quant import Quant
from .result import LLMConfig, LLMEstimate
from .source import GraphSource, LLMSource
from .tables import fold_name, table_depth
from .tp import DEFAULT_PLAN, TPPlan, check_tp

__all__ = ["estimate", "open_source", "TP_CANDIDATES"]

TP_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)


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
    from .loaders import open_model

    return open_model(model, **opts)


def _batches(batch: int | Sequence[int]) -> list[int]:
    bs = [batch] if isinstance(batch, int) else list(batch)
    if not bs:
        raise InputError("--batch needs at least one value, e.g. --batch 1,8,32")
    for b in bs:
        if not isinstance(b, int) or isinstance(b, bool) or b < 1:
            raise InputError(f"--batch values must be integers >= 1, got {b!r}")
    return bs


def _check_lengths(prompt: int, gen: int) -> None:
    if not isinstance(prompt, int) or isinstance(prompt, bool) or prompt < 1:
        raise InputError(f"--prompt must be an integer >= 1 (tokens in the prompt), got {prompt!r}")
    if not isinstance(gen, int) or isinstance(gen, bool) or gen < 1:
        raise InputError(f"--gen must be an integer >= 1 (output tokens to generate; the first comes from the "
                         f"prefill), got {gen!r}")


def kv_write_sums(ops) -> tuple[float, float]:
    """(KV bytes the cache appends write, all KV-role bytes written) of a counted decode step's ops."""
    return (sum(c.kv_write_bytes for op, c in ops if op.op == APPEND), sum(c.kv_write_bytes for _, c in ops))


def kv_bytes_per_token_of(appended: float, all_kv: float, b: int, src: LLMSource, quant: Quant, tp: int) -> float:
    """Cache bytes per token and sequence, per device, from a decode step of batch *b*'s KV write sums."""
    if appended:
        return appended / b
    bits = dtype_bits(quant.kv or src.spec.dtype or "bf16")
    per = src.spec.kv_bytes_per_token(bits)  # the graph writes its cache inside a fused op
    return per / tp if per else all_kv / b


class _Run:
    def __init__(self, src: LLMSource, pipe: Pipeline, prompt: int, gen: int, depth: int | None, fold: bool,
                 ideal: bool, serving: ServingMemory | None = None):
        self.src, self.pipe, self.prompt, self.gen, self.depth, self.fold = src, pipe, prompt, gen, depth, fold
        self.ideal = ideal
        self.serving = serving or ServingMemory()
        self.batches: list[int] = []
        self._params = None
        self._critical: dict[tuple, list[dict]] = {}
        self._act_tp: dict[tuple[int, int], float] = {}

    def params(self):
        if self._params is None:
            self._params = self.src.params() or params_from_graph(self.pipe.raw("prefill", 1, self.prompt))
        return self._params

    def decode_phase(self, b: int):
        P, gen = self.prompt, self.gen
        meta = {"model": self.src.name}
        if self.src.kv_cache:
            P = self.src.decode_start(P)  # an encoder-decoder: its decoder prompt
            return self.pipe.phase("decode", "decode", b, P, P + max(gen - 2, 0), 1, meta)
        return self.pipe.phase("decode", "prefill", b, P + 1, P + max(gen - 1, 1), 2, meta)

    def plan_grids(self) -> None:
        """Sample the phases on grids (:mod:`graphroof.llm.poly`) whose points are the ones a direct estimate
        traces anyway (the first batch, and the second batch the critical batch needs): the counted graphs of
        other batches are then interpolated from the grid's (:mod:`graphroof.llm.countgrid`) instead of traced
        and counted, and the advice's what-ifs priced on the grid (:mod:`graphroof.llm.whatif`)."""
        bs = sorted(set(self.batches))
        b2 = grid_points(bs, 1) if len(bs) > 1 else (bs[0], bs[0] + 1)
        P, G = self.prompt, self.gen
        if self.src.kv_cache:
            self.pipe.plan_grid("prefill", GridPlan(b2, (P,), DEGREE["prefill"]))
            D = self.src.decode_start(P)  # an encoder-decoder decodes from its decoder prompt
            self.pipe.plan_grid("decode", GridPlan(b2, grid_points({D, D + max(G - 2, 0)}, 1), DEGREE["decode"]))
        elif len(bs) > 1:  # no cache: decode steps are prefill graphs at P + 1 .. P + G - 1
            need = {P, *range(P + 1, P + max(G - 1, 1) + 1)}
            self.pipe.plan_grid("prefill", GridPlan(b2, grid_points(need, 2), DEGREE["prefill"]))

    def key(self, depth: int):
        return lambda op: fold_name(scope_at(op.scope, depth)) if self.fold else scope_at(op.scope, depth)

    def critical(self, depth: int, b: int) -> list[dict]:
        """Costs are affine in the batch, so any two batches give the line: reuse counted ones."""
        phase, x = ("decode", self.src.decode_start(self.prompt)) if self.src.kv_cache else ("prefill", self.prompt + 1)
        other = next((o for o in self.batches if o != b), b + 1)
        b1, b2 = sorted((b, other))
        plan = self.pipe.plans.get(phase)
        if plan is not None and len(plan.bs) == 2 and x in plan.xs:
            b1, b2 = plan.bs  # the same line through two traced batches
        key = (phase, b1, b2, x, depth)
        if key not in self._critical:  # the same two batches serve every configuration of a grid
            ops1 = self.pipe.counted(phase, b1, x).ops
            ops2 = self.pipe.counted(phase, b2, x).ops
            self._critical[key] = critical_table(ops1, ops2, b1, b2, self.pipe.hw, self.key(depth))
        return [dict(r) for r in self._critical[key]]

    def kv_bytes_per_token(self, b: int) -> float:
        """Cache bytes per token and sequence, per device: what one decode step appends (one token each)."""
        if not self.src.kv_cache:
            return 0.0
        ops = self.pipe.counted("decode", b, self.src.decode_start(self.prompt)).ops
        appended, all_kv = kv_write_sums(ops)
        if not appended and not self.src.spec.kv_elems_per_token and self.state_bytes_per_seq(b):
            return 0.0  # a pure state-space model: its only cache is the recurrent state
        return kv_bytes_per_token_of(appended, all_kv, b, self.src, self.pipe.quant, self.pipe.tp)

    def cross_kv(self, b: int) -> tuple[float, int]:
        """Encoder-decoder: (cross-attention KV bytes per encoder token and sequence, per device; encoder tokens),
        from what the prefill appends; (0, 0) without a cross-attention cache."""
        enc = self.src.cross_tokens(self.prompt)
        if not enc:
            return 0.0, 0
        from .encdec import cross_kv_per_token

        ops = self.pipe.counted("prefill", b, self.prompt).ops
        appended = sum(c.kv_write_bytes for op, c in ops if op.op == APPEND) / b
        return cross_kv_per_token(appended, self.kv_bytes_per_token(b), self.src.decode_start(self.prompt), enc), enc

    def state_bytes_per_seq(self, b: int) -> float:
        """Recurrent-state bytes per sequence and device (state-space layers: fixed, whatever the context): what
        one decode step rewrites (:data:`~graphroof.counters.rules.ssm.STATE_OPS`), so --kv and --tp apply."""
        if not self.src.kv_cache or not self.src.spec.state_layers:
            return 0.0
        ops = self.pipe.counted("decode", b, self.src.decode_start(self.prompt)).ops
        return sum(c.kv_write_bytes for op, c in ops if op.op in STATE_OPS) / b

    def activation_peak(self, b: int) -> float:
        """Activation peak of the prefill graph at batch *b* (the whole prompt batch in one pass)."""
        return self.pipe.activation_peak("prefill", b, self.prompt)

    def activation_peak_at_tp(self, b: int, n: int) -> float:
        """:meth:`activation_peak` under a TP split of degree *n* (kept: memory() asks for it per candidate)."""
        if (b, n) not in self._act_tp:
            pipe = self.pipe
            self._act_tp[b, n] = activation_peak_bytes(pipe.prepare(pipe.raw("prefill", b, self.prompt), tp=n))
        return self._act_tp[b, n]

    def memory(self, b: int, *, min_tp: bool = True) -> MemoryFit:
        """Memory fit at batch *b*; *min_tp* False leaves ``min_tp`` None (not searched)."""
        # ctx: tokens in the (self-attention) cache at the end: prompt + gen (encoder-decoder: decoder prompt + gen)
        pipe, ctx, sm = self.pipe, self.src.decode_start(self.prompt) + self.gen, self.serving
        weights = resident_weight_bytes(self.params(), pipe.quant, pipe.tp, pipe.plan)
        # KV bytes per sequence at ctx = bytes per token * tokens held per layer (sliding layers hold <= W),
        # in whole paged-KV blocks; + an encoder-decoder's cross-attention KV of the encoder tokens
        kv_tok = self.kv_bytes_per_token(b) * self.src.spec.kv_cache_tokens(ctx) / ctx
        cross_tok, enc = self.cross_kv(b)
        state = self.state_bytes_per_seq(b)  # + the fixed recurrent state of state-space layers
        kv_seq = kv_tok * sm.kv_tokens(ctx) + cross_tok * sm.kv_tokens(enc) + state
        act_full = self.activation_peak(b)
        batch_tokens = b * self.prompt
        act = act_full * sm.chunk_tokens(batch_tokens) / batch_tokens  # chunked prefill: one chunk live
        cap = pipe.hw.mem_capacity_bytes
        usable = cap * sm.gpu_mem_util if cap else None
        # one figure per configuration: the activations of a full chunk (the budget, or one sequence's prompt)
        chunk = sm.max_batched_tokens or self.prompt
        act_chunk = act_full / batch_tokens * chunk
        mb = max_concurrent(usable, weights, act_chunk, kv_seq) if usable else None
        tp_min = self.min_tp(b, usable, kv_seq, act) if (usable and min_tp) else None
        return MemoryFit(weights, (kv_tok * ctx + cross_tok * enc + state) * b, act, cap, mb, tp_min, usable, sm,
                         kv_seq * b, state * b)

    def min_tp(self, b: int, usable: float, kv_seq: float, act: float) -> int | None:
        """Smallest TP degree whose weights + KV + activations fit in *usable* bytes per device (None: none)."""
        pipe, sm = self.pipe, self.serving
        batch_tokens = b * self.prompt
        for n in TP_CANDIDATES:
            try:
                check_tp(n, self.src.spec.heads, self.src.spec.kv_heads, self.src.spec.intermediate)
            except GraphroofError:
                continue
            fixed = resident_weight_bytes(self.params(), pipe.quant, n, pipe.plan) + kv_seq * pipe.tp / n * b
            if fixed > usable:
                continue  # activations are >= 0: no need to shard the graph at n to know it does not fit
            try:
                act_n = act if n == pipe.tp else (self.activation_peak_at_tp(b, n)
                                                  * sm.chunk_tokens(batch_tokens) / batch_tokens)
            except GraphroofError:
                continue
            if fixed + act_n <= usable:
                return n
        return None

    def config(self, b: int) -> LLMConfig:
        prefill = self.pipe.phase("prefill", "prefill", b, self.prompt, self.prompt, 0, {"model": self.src.name})
        decode = self.decode_phase(b)
        depth = self.depth or table_depth(decode.analysis)
        return LLMConfig(batch=b, prompt=self.prompt, gen=self.gen, tp=self.pipe.tp, prefill=prefill, decode=decode,
                         memory=self.memory(b), critical=self.critical(depth, b), table_depth=depth, fold=self.fold,
                         ideal=self.ideal)


def estimate(
    model: Any,
    *,
    hw: str | HardwareProfile | None = "a100",
    prompt: int = 1024,
    gen: int = 256,
    batch: int | Sequence[int] = 1,
    weights: str | None = None,
    activations: str | None = None,
    kv: str | None = None,
    tp: int = 1,
    ideal: bool = False,
    depth: int | None = None,
    fold: bool = True,
    attention: str = "flash",
    causal: str = "kernel",
    rules: Mapping[str, Rule | None] | None = None,
    strict: bool = False,
    plan: TPPlan = DEFAULT_PLAN,
    peak_flops_per_s: float | None = None,
    mem_bw_bytes_per_s: float | None = None,
    runtime: str = "serving",
    gpu_mem_util: float = 0.9,
    kv_block: int = 16,
    max_batched_tokens: int | None = None,
    progress: Callable[[str], None] | None = None,
    **frontend_opts: Any,
) -> LLMEstimate:
    """Serving estimate of an LLM: one configuration per batch size.

    Parameters
    ----------
    model : zoo name, transformers ``config.json`` (or its folder), ``.onnx`` with ``past_key_values`` inputs,
        ``"pkg.module:factory"``, an ``nn.Module``, an :class:`~graphroof.llm.source.LLMSource`, or OpGraphs.
    hw : hardware profile name / path / object.
    prompt, gen : prompt tokens and generated tokens per sequence.
    batch : one batch size or several (a sweep).
    weights, activations, kv : what-if storage dtypes by role (``int4``, ``fp8``, ``bf16`` ...).
    tp : tensor-parallel degree (Megatron split, collectives on the profile's interconnect).
    ideal : report the ideal roofline only (100% of peaks, no launch overhead).
    depth, fold : layer-table depth (default: one level below the repeated block) and folding of blocks.
    attention, causal : counting settings (see :mod:`graphroof.counters.settings`).
    gpu_mem_util, kv_block, max_batched_tokens : the serving memory model (:class:`~graphroof.llm.memory.
        ServingMemory`): usable share of the device memory (0.9, as vLLM), paged-KV block size in tokens (16),
        prefill chunk budget in tokens (``None``: the whole prompt batch in one pass).
    runtime : fusion + launch preset (:mod:`graphroof.fuse.runtimes`): ``serving`` (default: fused norms,
        rotary and activations, QKV / gate+up GEMMs, decode under CUDA graphs), ``compiled`` or ``eager``.
    progress : called with a stage message before each trace (the CLI's :class:`graphroof.cli.progress.Progress`).

    Examples
    --------
    >>> import graphroof.llm as llm                                       # doctest: +SKIP
    >>> r = llm.estimate("llama-2-7b", hw="a100", prompt=1024, gen=256, batch=[1, 8, 32])  # doctest: +SKIP
    >>> r.configs[0].tpot_s                                              # doctest: +SKIP
    """
    from ..api import resolve_hardware

    _check_lengths(prompt, gen)
    serving = ServingMemory(gpu_mem_util, kv_block, max_batched_tokens)  # checked before any trace
    batches = _batches(batch)
    quant = Quant.parse(weights, activations, kv)
    check_tp(tp)
    settings = CountSettings(attention=attention, causal=causal)
    prof = resolve_hardware(hw, peak_flops_per_s=peak_flops_per_s, mem_bw_bytes_per_s=mem_bw_bytes_per_s,
                            ideal=ideal)
    if depth is not None and depth < 1:
        raise InputError(f"--depth must be >= 1, got {depth}")
    if progress and not isinstance(model, (LLMSource, OpGraph, tuple)):
        progress(f"building {model if isinstance(model, str) else type(model).__name__}")
    src = open_source(model, **frontend_opts)
    src.check_context(prompt, gen)
    spec = src.spec
    check_tp(tp, spec.heads, spec.kv_heads, spec.intermediate)
    if tp > 1 and not prof.interconnect_bw_bytes_per_s:
        raise InputError(f"--tp {tp}: hardware profile {prof.name} has no interconnect.bw_bytes_per_s_per_direction "
                         "to cost the collectives on; pick a profile with an interconnect")
    rt = get_runtime(runtime)
    pipe = Pipeline(src, prof, quant=quant, tp=tp, plan=plan, settings=settings, rules=rules, strict=strict,
                    depth=depth, progress=progress, runtime=rt)
    run = _Run(src, pipe, prompt, gen, depth, fold, ideal, serving)
    run.batches = batches
    run.plan_grids()
    configs = [run.config(b) for b in batches]
    notes = list(getattr(src, "notes", []) or [])
    notes.append(rt.describe())
    if not src.kv_cache:
        msg = (f"{src.name} has no KV cache ({src.no_cache_reason}): each decode step is estimated as a full "
               "forward pass over the whole context (prompt + tokens so far, no cache reuse), summed exactly "
               "over the steps; KV-cache bytes are 0")
        notes.append(msg)
        warn_user(msg)
    for c in configs:
        for n in c.prefill.notes + c.decode.notes + pipe.poly_notes:
            if n not in notes:
                notes.append(n)
    return LLMEstimate(model=src.name, hw=prof, prompt=prompt, gen=gen, tp=tp, quant=quant, ideal=ideal,
                       kv_cache=src.kv_cache, spec=src.spec, configs=configs, notes=notes, settings=settings,
                       pipeline=pipe)
