"""Terminal / markdown rendering of an LLM serving estimate (:class:`~graphroof.llm.result.LLMEstimate`)."""

from __future__ import annotations

from tabulate import tabulate

from ..llm.result import LLMConfig, LLMEstimate
from ..units import fmt_bytes, fmt_rate, fmt_time

__all__ = ["render_llm", "sweep_table", "layers_table", "memory_lines"]


def _fmt(fmt_fn, v):
    return "-" if v is None else fmt_fn(v)


def _tps(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def header_lines(r: LLMEstimate) -> list[str]:
    h = r.hw
    link = (f", {h.interconnect_name or 'interconnect'} {fmt_rate(h.interconnect_bw_bytes_per_s, 'B/s')} per direction"
            if h.interconnect_bw_bytes_per_s else "")
    cap = f", {fmt_bytes(h.mem_capacity_bytes)}" if h.mem_capacity_bytes else ""
    mode = ("ideal roofline only (100% of peaks, no launch overhead)" if r.ideal else
            f"realistic (efficiency matrix {h.matrix_efficiency:g}, vector {h.vector_efficiency:g}, memory "
            f"{h.mem_bw_efficiency:g}, interconnect {h.interconnect_efficiency:g}, launch "
            f"{fmt_time(h.launch_overhead_s)}/op from the profile), ideal roofline beside it")
    return [
        f"model: {r.model}; {'KV-cache decode' if r.kv_cache else 'no KV cache: decode recomputes the context'}",
        f"hardware: {h.label}; {fmt_rate(h.mem_bw_bytes_per_s, 'B/s')}{cap}{link}",
        f"prompt {r.prompt} tokens, gen {r.gen} tokens; dtypes: {r.quant.describe()}; TP {r.tp}",
        f"mode: {mode}",
        "tokens: the prefill gives the first token (TTFT); gen-1 decode steps give the rest (TPOT = their mean); "
        "e2e = TTFT + (gen-1) TPOT; tok/s = batch * gen / e2e",
    ]


def sweep_table(r: LLMEstimate, markdown: bool) -> str:
    heads = ["batch", "TTFT", "TPOT", "e2e", "tok/s"]
    if not r.ideal:
        heads += ["TTFT ideal", "TPOT ideal", "tok/s ideal"]
    heads += ["prefill", "decode", "KV cache", "weights", "peak mem", "fits"]
    rows = []
    for c in r.configs:
        row = [c.batch, fmt_time(c.ttft_s), _fmt(fmt_time, c.tpot_s), fmt_time(c.e2e_s), _tps(c.output_tokens_per_s)]
        if not r.ideal:
            row += [fmt_time(c.ttft(True)), _fmt(fmt_time, c.tpot(True)), _tps(c.tokens_per_s(True))]
        fits = {True: "yes", False: "NO", None: "?"}[c.fits]
        row += [c.prefill.analysis.totals.bound, c.decode.analysis.totals.bound, fmt_bytes(c.kv_cache_bytes),
                fmt_bytes(c.weight_bytes), fmt_bytes(c.memory.total_bytes), fits]
        rows.append(row)
    return tabulate(rows, headers=heads, tablefmt="github" if markdown else "simple", disable_numparse=True)


def memory_lines(r: LLMEstimate, c: LLMConfig) -> list[str]:
    m = c.memory
    per = " per device" if c.tp > 1 else ""
    line = (f"memory{per}, batch {c.batch} at {c.prompt + c.gen} tokens: weights {fmt_bytes(m.weight_bytes)} + "
            f"KV cache {fmt_bytes(m.kv_cache_bytes)} + activation peak {fmt_bytes(m.activation_peak_bytes)} = "
            f"{fmt_bytes(m.total_bytes)}")
    if m.capacity_bytes is None:
        return [line + "; the profile gives no memory capacity"]
    line += f" of {fmt_bytes(m.capacity_bytes)}: "
    if m.fits:
        line += f"fits; max batch that fits: {m.max_batch}"
    else:
        line += "does not fit"
        if m.min_tp and m.min_tp > c.tp:
            line += f"; smallest TP that fits: --tp {m.min_tp}"
        elif m.min_tp is None:
            line += "; no TP degree up to 64 fits"
        if m.max_batch:
            line += f"; max batch that fits at TP {c.tp}: {m.max_batch}"
    return [line]


def layers_table(c: LLMConfig, markdown: bool, ideal: bool) -> str:
    pre = {r["name"]: r for r in c.layer_rows("prefill")}
    dec = {r["name"]: r for r in c.layer_rows("decode")}
    crit = {r["name"]: r for r in c.critical}
    names = list(pre) + [n for n in dec if n not in pre]
    key = "time_s" if ideal else "time_realistic_s"
    tot_p = sum(r[key] for r in pre.values()) or 1.0
    tot_d = sum(r[key] for r in dec.values()) or 1.0
    rows = []
    for n in names:
        p, d, k = pre.get(n), dec.get(n), crit.get(n)
        if not ((p and p["time_s"]) or (d and d["time_s"])):
            continue  # views only (no FLOPs, no bytes): nothing to show
        cb = "-" if not k else (str(k["critical_batch"]) if k["critical_batch"] is not None else "never")
        rows.append([n, (p or d)["repeat"],
                     _fmt(fmt_time, p and p[key]), p["bound"] if p else "-", f"{100 * p[key] / tot_p:.1f}%" if p else "-",
                     _fmt(fmt_time, d and d[key]), d["bound"] if d else "-", f"{100 * d[key] / tot_d:.1f}%" if d else "-",
                     cb])
    heads = ["layer", "x", "prefill time", "bound", "share", "decode time/step", "bound", "share", "critical batch"]
    return tabulate(rows, headers=heads, tablefmt="github" if markdown else "simple", disable_numparse=True)


def render_llm(r: LLMEstimate, markdown: bool = False) -> str:
    out: list[str] = []
    bullet = "- " if markdown else ""
    if markdown:
        out.append(f"# graphroof llm: {r.model} on {r.hw.label}\n")
    out.extend(bullet + ln for ln in header_lines(r))
    out.append("\n## Sweep\n" if markdown else "")
    out.append(sweep_table(r, markdown))
    out.append("")
    for c in r.configs:
        out.extend(bullet + ln for ln in memory_lines(r, c))
    for c in r.configs:
        ctx = (f"decode past {c.decode.context[0]}..{c.decode.context[1]}" if r.kv_cache
               else f"decode recomputes seq {c.decode.context[0]}..{c.decode.context[1]}")
        title = (f"layers, batch {c.batch} (prefill at seq {c.prompt}; {ctx}, mean per step; "
                 f"critical batch = decode batch from which the layer is compute-bound, ideal roofline)")
        out.append(f"\n## {title[0].upper()}{title[1:]}\n" if markdown else f"\n{title}")
        out.append(layers_table(c, markdown, r.ideal))
    out.append("")
    for n in r.notes:
        out.append(f"{bullet}note: {n}")
    out.append(f"{bullet}note: {r.settings.describe()}")
    return "\n".join(out).rstrip() + "\n"
