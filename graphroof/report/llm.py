"""Terminal / markdown rendering of an LLM serving estimate (``graphroof.llm.result.LLMEstimate``)."""

from __future__ import annotations

from typing import Any

from ..units import fmt_bytes, fmt_rate, fmt_time
from .columns import Column, table

__all__ = ["render_llm", "sweep_table", "layers_table", "memory_lines", "side_by_side", "sweep_columns"]


def _fmt(fmt_fn, v):
    return "-" if v is None else fmt_fn(v)


def _tps(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def fmt_energy(v: float | None) -> str:
    """Joules per token or tokens per joule to 3 significant digits; ``n/a`` without a board power (never 0)."""
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def energy_line(r: Any) -> str:
    """How the energy columns are bounded, or why they are n/a."""
    w = r.configs[0].board_power_w if r.configs else None
    if w is None:
        return (f"energy: n/a, the profile of {r.hw.label} gives no board power (add board_power_w with its "
                "source to the profile)")
    src = r.hw.sources.get("board_power_w", "")
    lay = getattr(r, "layout", None)
    n = f"{lay['world']} GPUs (the layout)" if lay else f"TP {r.tp}"
    return (f"energy: J/tok = board power {w:g} W x {n} x e2e / (batch x gen), an upper bound (every device at "
            f"full board power throughout); tok/J its inverse" + (f" (board power: {src})" if src else ""))


def _attention_ops(r: Any):
    for c in r.configs[:1]:
        for ph in (c.prefill, c.decode):
            for op in ph.analysis.graph:
                if "attention" in op.op.split(".")[-1].lower():
                    yield op


def _is_causal(op) -> bool:
    a = op.attrs
    return bool(a.get("is_causal") or a.get("mask_causal") or a.get("unidirectional")
                or op.op.endswith("GroupQueryAttention"))


def settings_note(r: Any) -> str | None:
    """The attention counting settings, as far as they applied: none without attention, the causal part only
    when a causal attention was counted (a bidirectional encoder's square is counted whole either way)."""
    ops = list(_attention_ops(r))
    if not ops:
        return None
    text = r.settings.describe()
    if not any(_is_causal(op) for op in ops):
        text = text.split("; causal attention")[0]
    return text


def header_lines(r: Any) -> list[str]:
    h = r.hw
    link = (f", {h.interconnect_name or 'interconnect'} {fmt_rate(h.interconnect_bw_bytes_per_s, 'B/s')} per direction"
            if h.interconnect_bw_bytes_per_s else "")
    cap = f", {fmt_bytes(h.mem_capacity_bytes)}" if h.mem_capacity_bytes else ""
    runtime = r.configs[0].prefill.analysis.runtime if r.configs else "eager"
    if r.ideal:
        mode = "ideal roofline only (100% of peaks, no launch overhead)"
    elif h.timing is not None:
        mode = (f"realistic, kernel-level model of the profile (GEMM tiles and waves on {h.timing.sm_count} SMs, "
                "streaming bandwidth by kernel kind, alpha-beta collectives, launches), ideal roofline beside it")
    else:
        mode = (f"realistic (efficiency matrix {h.matrix_efficiency:g}, vector {h.vector_efficiency:g}, memory "
                f"{h.mem_bw_efficiency:g}, interconnect {h.interconnect_efficiency:g}, launch "
                f"{fmt_time(h.launch_overhead_s)}/kernel from the profile), ideal roofline beside it")
    mode += f"; runtime preset {runtime}"
    decode = 'KV-cache decode' if r.kv_cache else 'no KV cache: decode recomputes the context'
    states = getattr(r.spec, "state_layers", 0)
    if r.kv_cache and states:  # state-space layers: a fixed recurrent state per sequence (graphroof.llm.ssm)
        attn = (r.spec.layers or states) - states
        decode = (f"recurrent-state decode ({states} state-space layers" +
                  (f"; KV cache on {attn} attention layers)" if attn else ", no KV cache)"))
    return [
        f"model: {r.model}; {decode}",
        f"hardware: {h.label} ({getattr(h, 'origin', 'assumed')} timing constants); "
        f"{fmt_rate(h.mem_bw_bytes_per_s, 'B/s')}{cap}{link}",
        f"{r.input_text()}, gen {r.gen} tokens; dtypes: {r.quant.describe()}; TP {r.tp}",
        *([f"parallel layout: {r.layout['describe']}"] if getattr(r, "layout", None) else []),
        f"mode: {mode}",
        "tokens: the prefill gives the first token (TTFT); gen-1 decode steps give the rest (TPOT = their mean); "
        "e2e = TTFT + (gen-1) TPOT; tok/s = batch * gen / e2e",
        *band_lines(r),
    ]


def band_lines(r: Any) -> list[str]:
    """The error bands of the realistic figures (the ranges columns), in words; none when ideal."""
    bands = getattr(r, "bands", {}) or {}
    if not bands:
        return []
    names = {"ttft": "TTFT", "tpot": "TPOT", "throughput": "e2e and tok/s"}
    parts = [f"{names[k]} {b.describe()}" for k, b in bands.items() if k in names]
    return ["error bands (the range columns: the factor within which 90% of graphroof validate's measured "
            "predictions of the regime fell): " + "; ".join(parts)]


def _range(c: Any, what: str, fmt: Any) -> str:
    r = c.band_range(what) if hasattr(c, "band_range") else None
    return "-" if r is None else f"{fmt(r[0])} - {fmt(r[1])}"


_SWEEP_HEAD = (
    Column("batch", lambda c: c.batch),
    Column("TTFT", lambda c: fmt_time(c.ttft_s)),
    Column("TPOT", lambda c: _fmt(fmt_time, c.tpot_s)),
    Column("e2e", lambda c: fmt_time(c.e2e_s)),
    Column("tok/s", lambda c: _tps(c.output_tokens_per_s)),
)
_SWEEP_BANDS = (
    Column("TTFT range", lambda c: _range(c, "ttft", fmt_time)),
    Column("TPOT range", lambda c: _range(c, "tpot", fmt_time)),
    Column("tok/s range", lambda c: _range(c, "tokens_per_s", _tps)),
)
_SWEEP_IDEAL = (
    Column("TTFT ideal", lambda c: fmt_time(c.ttft(True))),
    Column("TPOT ideal", lambda c: _fmt(fmt_time, c.tpot(True))),
    Column("tok/s ideal", lambda c: _tps(c.tokens_per_s(True))),
)
_SWEEP_TAIL = (
    Column("prefill", lambda c: c.prefill.analysis.totals.bound),
    Column("decode", lambda c: c.decode.analysis.totals.bound),
    Column("KV cache", lambda c: fmt_bytes(c.kv_cache_bytes)),
    Column("weights", lambda c: fmt_bytes(c.weight_bytes)),
    Column("peak mem", lambda c: fmt_bytes(c.memory.total_bytes)),
    Column("fits", lambda c: {True: "yes", False: "NO", None: "?"}[c.fits]),
    Column("J/tok", lambda c: fmt_energy(c.joules_per_token())),
    Column("tok/J", lambda c: fmt_energy(c.tokens_per_joule())),
)


def sweep_columns(r: Any) -> tuple[Column, ...]:
    bands = () if r.ideal or not getattr(r, "bands", None) else _SWEEP_BANDS
    return (*_SWEEP_HEAD, *bands, *(() if r.ideal else _SWEEP_IDEAL), *_SWEEP_TAIL)


def sweep_table(r: Any, markdown: bool) -> str:
    """One row per batch size (an ``LLMConfig``); the ideal columns only beside realistic times."""
    return table(r.configs, sweep_columns(r), "markdown" if markdown else "terminal")


def memory_lines(r: Any, c: Any) -> list[str]:
    m = c.memory
    per = " per device" if c.tp > 1 else ""
    line = (f"memory{per}, batch {c.batch} at {c.prompt + c.gen} tokens: weights {fmt_bytes(m.weight_bytes)} + "
            f"KV cache {fmt_bytes(m.kv_cache_bytes)}"
            + (f" (recurrent state {fmt_bytes(m.state_bytes)} of it)" if m.state_bytes else "")
            + f" + activation peak {fmt_bytes(m.activation_peak_bytes)} = "
            f"{fmt_bytes(m.total_bytes)}")
    if m.capacity_bytes is None:
        return [line + "; the profile gives no memory capacity"]
    usable = m.usable_bytes if m.usable_bytes is not None else m.capacity_bytes
    sv = m.serving
    line += (f" of {fmt_bytes(usable)} usable ({sv.gpu_mem_util:g} of {fmt_bytes(m.capacity_bytes)}; KV in "
             f"{sv.kv_block}-token blocks" + (f", prefill chunks of {sv.max_batched_tokens} tokens"
                                              if sv.max_batched_tokens else "") + "): ")
    if m.fits:
        line += f"fits; max concurrent sequences: {m.max_batch}"
    else:
        line += "does not fit"
        if m.min_tp and m.min_tp > c.tp:
            line += f"; smallest TP that fits: --tp {m.min_tp}"
        elif m.min_tp is None:
            line += "; no TP degree up to 64 fits"
        if m.max_batch:
            line += f"; max concurrent sequences at TP {c.tp}: {m.max_batch}"
            if m.max_batch >= c.batch:  # the KV fits: what does not is the one-pass prefill of the whole batch
                line += (f" (their KV fits beside one prompt's prefill activations; the {c.batch} prompts "
                         f"prefilled in one pass do not: --max-batched-tokens {c.prompt} prefills one at a time)")
    return [line]


def memory_bar_text(c: Any, width: int = 50) -> str | None:
    """``[█████████▓▓░·······]`` weights █, KV cache ▓, activations ░, free ·, ``|`` = capacity (when over it)."""
    m = c.memory
    if not m.capacity_bytes:
        return None
    scale = max(m.capacity_bytes, m.total_bytes)
    cells = []
    for ch, v in (("█", m.weight_bytes), ("▓", m.kv_cache_bytes), ("░", m.activation_peak_bytes)):
        cells += [ch] * round(width * v / scale)
    cap = round(width * m.capacity_bytes / scale)
    cells += ["·"] * max(0, width - len(cells))
    if m.total_bytes > m.capacity_bytes:
        cells.insert(cap, "|")
    return (f"[{''.join(cells[:width + 1])}] batch {c.batch}: weights █, KV cache ▓, activations ░, free · "
            f"(bar = {fmt_bytes(scale)}{'; | = capacity' if m.total_bytes > m.capacity_bytes else ''})")


def _phase_cols(phase: str, key: str, title: str) -> tuple[Column, ...]:
    def get(row):
        return row[phase]
    return (
        Column(title, lambda row: _fmt(fmt_time, get(row) and get(row)[key])),
        Column("bound", lambda row: get(row)["bound"] if get(row) else "-"),
        Column("share", lambda row: f"{100 * get(row)[key] / row[f'total_{phase}']:.1f}%" if get(row) else "-"),
    )


def _critical(row) -> str:
    k = row["critical"]
    return "-" if not k else (str(k["critical_batch"]) if k["critical_batch"] is not None else "never")


def layers_table(c: Any, markdown: bool, ideal: bool) -> str:
    """Prefill and decode side by side per layer (folded blocks: ``x`` = how many)."""
    rows, columns = side_by_side(c, ideal)
    return table(rows, columns, "markdown" if markdown else "terminal")


def side_by_side(c: Any, ideal: bool) -> tuple[list[dict], tuple[Column, ...]]:
    """The rows and columns of the prefill / decode layer table (terminal, markdown and HTML share them)."""
    pre = {r["name"]: r for r in c.layer_rows("prefill")}
    dec = {r["name"]: r for r in c.layer_rows("decode")}
    crit = {r["name"]: r for r in c.critical}
    key = "time_s" if ideal else "time_realistic_s"
    tot_p = sum(r[key] for r in pre.values()) or 1.0
    tot_d = sum(r[key] for r in dec.values()) or 1.0
    rows = []
    for n in list(pre) + [n for n in dec if n not in pre]:
        p, d = pre.get(n), dec.get(n)
        if not ((p and p["time_s"]) or (d and d["time_s"])):
            continue  # views only (no FLOPs, no bytes): nothing to show
        # blocks fold per phase (identical work): a phase may fold fewer of them than the other
        reps = list(dict.fromkeys(x["repeat"] for x in (p, d) if x))
        rows.append({"name": n, "repeat": reps[0] if len(reps) == 1 else " / ".join(map(str, reps)),
                     "prefill": p, "decode": d, "critical": crit.get(n),
                     "total_prefill": tot_p, "total_decode": tot_d})
    columns = (Column("layer", lambda row: row["name"]), Column("x", lambda row: row["repeat"]),
               *_phase_cols("prefill", key, "prefill time"), *_phase_cols("decode", key, "decode time/step"),
               Column("critical batch", _critical))
    return rows, columns


def time_parts_lines(c) -> list[str]:
    """``TPOT 9.8 ms = roofline 6.8 ms + derating 2.3 ms + launch 20 us (0.2%) + collectives 0``, per phase."""
    out = []
    for label, ph in (("TTFT", c.prefill), ("TPOT", c.decode)):
        p = ph.analysis.time_parts()
        t = p["time_realistic_s"] or 1.0
        coll = p["time_collectives_s"]
        lay = getattr(c, "layout", None)
        if lay and lay.get("pp", 1) > 1:  # pipeline: the breakdown is one stage's step at its micro-batch
            req = c.figures.get("request_overhead_s", 0.0) if label == "TTFT" else 0.0
            label = (f"{'prefill' if label == 'TTFT' else 'decode'} step of the last of {lay['pp']} stages"
                     + (f" (TTFT {fmt_time(c.ttft_s)} also carries the runtime's request overhead {fmt_time(req)})"
                        if req else ""))
        elif label == "TPOT" and c.tpot_s and not c.ideal and \
                c.figures.get("decode_host_floor_s", 0.0) >= p["time_realistic_s"] * (1 - 1e-9):
            # the runtime's host work per sequence bounds the step (the preset's host_per_sequence_s)
            label = (f"decode step (TPOT {fmt_time(c.tpot_s)}: the runtime's host work per sequence, "
                     f"{fmt_time(c.figures['decode_host_floor_s'])} for {c.batch} sequences, bounds it)")
        elif label == "TPOT" and c.tpot_s and not c.ideal and \
                abs(c.tpot_s - p["time_realistic_s"]) > 1e-6 * p["time_realistic_s"]:
            # speculative decoding: the breakdown is one plain decode step; the TPOT is per accepted token
            label = f"plain decode step (TPOT {fmt_time(c.tpot_s)} with speculative decoding)"
        head = f"batch {c.batch} {label} {fmt_time(p['time_realistic_s'])}"
        # the runtime's per-request time ([launch].request_overhead_s), outside the steps, as the evaluator added it
        extra = c.figures.get("request_overhead_s", 0.0) if label == "TTFT" else 0.0
        k = c.figures.get("prefill_steps", 1) if label == "TTFT" else 1
        if k > 1:  # chunked prefill (graphroof.llm.chunked): the steps' sum; the breakdown is one unchunked pass
            head = (f"batch {c.batch} TTFT {fmt_time(c.ttft_s)} = "
                    + (f"request overhead {fmt_time(extra)} + " if extra else "")
                    + f"{k} chunked prefill steps {fmt_time(c.figures['prefill_steps_s'])}; one unchunked "
                    f"pass {fmt_time(p['time_realistic_s'])}")
        elif extra:
            head = (f"batch {c.batch} TTFT {fmt_time(c.ttft_s)} = request overhead {fmt_time(extra)} (the runtime's "
                    f"per-request setup, sampling and syncs) + prefill step {fmt_time(p['time_realistic_s'])}")
        out.append(f"{head} = roofline "
                   f"{fmt_time(p['time_roofline_s'])} + derating {fmt_time(p['time_derating_s'])} + launch "
                   f"{fmt_time(p['time_launch_s'])} ({p['time_launch_s'] / t:.1%}; {p['n_kernels']} kernels"
                   f"{', one CUDA-graph launch per step' if ph.analysis.step_launch_s else ''})"
                   + (f"; collectives {fmt_time(coll)} of it ({coll / t:.1%})" if coll else "")
                   + f"; floor max(sum Tc, sum Tm) {fmt_time(p['time_floor_s'])}")
    return out


def render_llm(r: Any, markdown: bool = False) -> str:
    out: list[str] = []
    bullet = "- " if markdown else ""
    if markdown:
        out.append(f"# graphroof llm: {r.model} on {r.hw.label}\n")
    out.extend(bullet + ln for ln in header_lines(r))
    out.append("\n## Sweep\n" if markdown else "")
    out.append(sweep_table(r, markdown))
    out.append("")
    out.append(bullet + energy_line(r))
    for c in r.configs:
        out.extend(bullet + ln for ln in time_parts_lines(c))
    for c in r.configs:
        out.extend(bullet + ln for ln in memory_lines(r, c))
        bar = memory_bar_text(c)
        if bar:
            out.append(f"{bullet}`{bar}`" if markdown else bar)
    for c in r.configs:
        ctx = (f"decode past {c.decode.context[0]}..{c.decode.context[1]}" if r.kv_cache
               else f"decode recomputes seq {c.decode.context[0]}..{c.decode.context[1]}")
        pre = f"seq {c.prompt}" if r.input_text().startswith("prompt") else r.input_text()
        title = (f"layers, batch {c.batch} (prefill at {pre}; {ctx}, mean per step; "
                 f"critical batch = decode batch from which the layer is compute-bound, ideal roofline)")
        out.append(f"\n## {title[0].upper()}{title[1:]}\n" if markdown else f"\n{title}")
        out.append(layers_table(c, markdown, r.ideal))
    steps = [it["text"] for it in r.next_steps]
    if steps:
        out.append("\n## Next steps\n" if markdown else "\nnext steps (re-estimated under each change):")
        out.extend(f"- {s}" if markdown else f"  - {s}" for s in steps)
    out.append("")
    for n in r.notes:
        out.append(f"{bullet}note: {n}")
    counted = settings_note(r)
    if counted:
        out.append(f"{bullet}note: {counted}")
    return "\n".join(out).rstrip() + "\n"
