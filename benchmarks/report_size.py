"""Size and render time of the reports, for a Llama-2-7B-shaped graph (and the real zoo model when present).

    python benchmarks/report_size.py [--real [MODEL]]

The synthetic graph has Llama-2-7B's layer structure at batch 1, seq 1024, fp16: 32 decoder layers of ~50 ops
each (projections, attention, RMSNorm and RoPE elementwise ops, views that move no data) with hand-computed
FLOPs and bytes, so the HTML has the same number of rows and chart points as a traced model.  ``--real``
also analyses a real model (default: the zoo's ``llama-2-7b``; or a Llama-2-7B ``config.json``; needs the
torch frontend).  Prints one table: model, ops, layers,
bytes of each format, render time, and the ratio of the HTML size to the markdown size (same run).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tabulate import tabulate  # noqa: E402

from graphroof.api import count_graph, resolve_hardware  # noqa: E402
from graphroof.counters.rules.table import table_cost  # noqa: E402
from graphroof.graph import OpGraph, OpNode  # noqa: E402
from graphroof.report import render_text  # noqa: E402

H, FFN, SEQ, HEADS, VOCAB, B = 4096, 11008, 1024, 32, 32000, 2  # fp16: 2 bytes per element


def _op(g: OpGraph, name: str, op: str, scope: str, flops: float, nbytes: float, kind: str = "vector") -> None:
    g.add_op(OpNode(name, op, attrs={"flops": flops, "bytes": nbytes, "kind": kind, "compute_dtype": "fp16"},
                    scope=scope))


def synthetic_llama(n_layers: int = 32) -> OpGraph:
    g = OpGraph("llama-2-7b-shaped", meta={"capture": "synthetic (benchmarks/report_size.py)"})
    act = SEQ * H * B
    i = 0

    def nxt(kind: str) -> str:
        nonlocal i
        i += 1
        return f"{kind}_{i}"

    _op(g, nxt("embedding"), "aten.embedding", "model.embed_tokens", 0, VOCAB * 0 + act * 2)
    for layer in range(n_layers):
        p = f"model.layers.{layer}"
        for norm in ("input_layernorm", "post_attention_layernorm"):
            for k in ("pow", "mean", "add", "rsqrt", "mul", "mul"):
                _op(g, nxt(k), f"aten.{k}", f"{p}.{norm}", SEQ * H, 2 * act)
            if norm == "input_layernorm":
                for proj in ("q_proj", "k_proj", "v_proj"):
                    _op(g, nxt("mm"), "aten.mm", f"{p}.self_attn.{proj}", 2 * SEQ * H * H, H * H * B + 2 * act, "matrix")
                    _op(g, nxt("view"), "aten.view", f"{p}.self_attn", 0, 0)
                    _op(g, nxt("transpose"), "aten.transpose", f"{p}.self_attn", 0, 0)
                for k in ("mul", "slice", "neg", "cat", "mul", "add", "mul", "slice", "neg", "cat", "mul", "add"):
                    _op(g, nxt(k), f"aten.{k}", f"{p}.self_attn.rotary_emb", SEQ * H if k in ("mul", "add") else 0, 2 * act)
                _op(g, nxt("sdpa"), "aten.scaled_dot_product_attention", f"{p}.self_attn",
                    2 * 2 * HEADS * SEQ * SEQ * (H // HEADS) // 2, 4 * act, "matrix")
                _op(g, nxt("transpose"), "aten.transpose", f"{p}.self_attn", 0, 0)
                _op(g, nxt("view"), "aten.view", f"{p}.self_attn", 0, 0)
                _op(g, nxt("mm"), "aten.mm", f"{p}.self_attn.o_proj", 2 * SEQ * H * H, H * H * B + 2 * act, "matrix")
                _op(g, nxt("add"), "aten.add", p, SEQ * H, 3 * act)
        for proj in ("gate_proj", "up_proj"):
            _op(g, nxt("mm"), "aten.mm", f"{p}.mlp.{proj}", 2 * SEQ * H * FFN, H * FFN * B + act + SEQ * FFN * B, "matrix")
        _op(g, nxt("silu"), "aten.silu", f"{p}.mlp.act_fn", 4 * SEQ * FFN, 2 * SEQ * FFN * B)
        _op(g, nxt("mul"), "aten.mul", f"{p}.mlp", SEQ * FFN, 3 * SEQ * FFN * B)
        _op(g, nxt("mm"), "aten.mm", f"{p}.mlp.down_proj", 2 * SEQ * H * FFN, H * FFN * B + act + SEQ * FFN * B, "matrix")
        _op(g, nxt("add"), "aten.add", p, SEQ * H, 3 * act)
        for _ in range(4):
            _op(g, nxt("view"), "aten.view", f"{p}.mlp", 0, 0)
    for k in ("pow", "mean", "add", "rsqrt", "mul", "mul"):
        _op(g, nxt(k), f"aten.{k}", "model.norm", SEQ * H, 2 * act)
    _op(g, nxt("mm"), "aten.mm", "lm_head", 2 * SEQ * H * VOCAB, H * VOCAB * B + act + SEQ * VOCAB * B, "matrix")
    return g


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", nargs="?", const="llama-2-7b", default=None, metavar="MODEL",
                    help="also analyse MODEL (default llama-2-7b from the zoo; needs the torch frontend)")
    args = ap.parse_args()
    hw = resolve_hardware("a100")
    cases = []
    g = synthetic_llama()
    keys = {op.op for op in g.ops()}
    cases.append(("llama-2-7b-shaped (synthetic)", lambda: count_graph(g, hw, rules=dict.fromkeys(keys, table_cost))))
    if args.real:
        import graphroof

        cases.append((f"{args.real} (traced)", lambda: graphroof.analyze(args.real, hw=hw)))
    rows = []
    for label, make in cases:
        a = make()
        sizes, times = {}, {}
        for fmt in ("html", "markdown", "json", "csv"):
            t0 = time.perf_counter()
            sizes[fmt] = len(render_text(a, fmt).encode("utf-8"))
            times[fmt] = time.perf_counter() - t0
        rows.append([label, len(a.ops), len(a.layers), f"{sizes['html'] / 1e3:.0f} kB", f"{times['html']:.2f} s",
                     f"{sizes['markdown'] / 1e3:.0f} kB", f"{sizes['json'] / 1e3:.0f} kB", f"{sizes['csv'] / 1e3:.0f} kB",
                     f"{sizes['html'] / sizes['markdown']:.1f}"])
    print(tabulate(rows, headers=["model", "ops", "layers", "html", "html render", "markdown", "json", "csv",
                                  "html/markdown"], disable_numparse=True))


if __name__ == "__main__":
    main()
