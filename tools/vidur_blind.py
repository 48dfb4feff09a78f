"""Blind check of the per-layer kernel model on the Vidur models graphroof was not fitted on.

    PYTHONPATH=. python tools/vidur_blind.py --vidur PATH/TO/microsoft-vidur [--models NAME,...] [--rows out.csv]

graphroof's bundled ``vidur_ops`` rows are Llama-2-7B and -70B on the A100 and H100 (``graphroof/validate/data``),
the rows the H100 / A100 GEMM and streaming constants were fitted on.  Vidur publishes the same per-layer profiling
for other models (``data/profiling/compute/{a100,h100,a40}/<org>/<model>/mlp.csv``: CodeLlama-34B, InternLM-20B,
Qwen-72B, Llama-3-8B and -70B, ...) and on the A40 (``a40-48gb-pcie``: GA102 constants derived from the A10 / A100
ones, its bf16 rate fitted on the A40's Llama-2-7B rows).  This tool prices those rows exactly as ``graphroof validate`` prices the bundled ones
(:func:`graphroof.validate.vidur.layer_kernel_times`: ``Engine(model, pricing=Pricing(tp=T, runtime='sarathi-serve'),
dtype='fp16')``, layer 0's kernels less attention and the KV store, no host launch) and prints n / median / p90 /
worst |error| per model and GPU; nothing is fitted.

Models: a zoo name where graphroof has one (:data:`ZOO`); otherwise a Llama-shaped transformers config built from the
row's model columns (``n_head``, ``n_kv_head``, ``n_embd``, ``n_expanded_embd``, ``vocab_size``), traced on the meta
device like any config.json (the architecture's small differences, e.g. Qwen-72B's QKV bias, are left out).  Models
without a gated MLP (``use_gated_mlp`` False: Phi-2, whose attention and MLP also run in parallel) are skipped: a
Llama-shaped stand-in would not be their program.  Each (tokens, TP) pair takes its first row, as the bundled files do.

``--send-recv`` also scores Vidur's NCCL send / recv tables (``data/profiling/network/{a100,h100}_dgx/send_recv.csv``:
2 GPUs in one node or in two, 2 KB - 512 MB) through :func:`graphroof.timing.p2p.send_recv_time`, the transfer a
pipeline stage boundary pays in ``graphroof llm --pp`` (:mod:`graphroof.llm.pp`).  Their 2-64 KB rows set the
profiles' ``p2p_latency_s`` / ``p2p_inter_latency_s`` (fitted); the larger ones are a check.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from pathlib import Path

from graphroof.validate.result import stats_of
from graphroof.validate.vidur import GPU_PROFILE, LAYER, PRESET, layer_kernel_times

#: Vidur's GPU folders and graphroof's profiles: the two the bundled rows are on, and the A40 (a40-48gb-pcie)
PROFILES = {**GPU_PROFILE, "a40": "a40-48gb-pcie"}

#: Vidur model folders graphroof has in its zoo (the others become Llama-shaped configs from their columns)
ZOO = {"meta-llama/Llama-2-7b-hf": "llama-2-7b", "meta-llama/Llama-2-70b-hf": "llama-2-70b",
       "meta-llama/Meta-Llama-3-8B": "llama-3-8b", "meta-llama/Meta-Llama-3-70B": "llama-3-70b"}
#: the (GPU, model) pairs a constant was fitted on (the bundled vidur_ops rows; the A40's Llama-2-7B rows): left out
#: unless named
FITTED = {(g, m) for g in GPU_PROFILE for m in ("meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-70b-hf")} | {
    ("a40", "meta-llama/Llama-2-7b-hf")}  # the A40's bf16 achievable rate (hw_profiles/a40-48gb-pcie.toml)


def read_rows(path: Path) -> dict[int, list[tuple[int, dict]]]:
    """TP -> [(tokens, row)] of one ``mlp.csv``, the first row of each (tokens, TP) pair, by tokens."""
    seen: dict[tuple[int, int], dict] = {}
    with path.open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            seen.setdefault((int(r["num_tokens"]), int(r["num_tensor_parallel_workers"])), r)
    out: dict[int, list[tuple[int, dict]]] = {}
    for (n, tp), r in sorted(seen.items()):
        out.setdefault(tp, []).append((n, r))
    return out


def measured_s(r: dict) -> float:
    """One layer's non-attention kernels (the bundled rows' sum, :data:`graphroof.validate.vidur.LAYER`) from the
    raw file's median columns, seconds."""
    return sum(k * float(r[f"time_stats.{c[:-3]}.median"]) * 1e-3 for c, k in LAYER.items())


def llama_config(r: dict) -> dict:
    """A Llama-shaped transformers config with the row's model columns (fp16; 2 layers: layer 0 is priced, and it
    must not be the last, whose residual add the fusion pass would join to the final norm)."""
    h, nh, nkv = int(r["n_embd"]), int(r["n_head"]), int(r["n_kv_head"])
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "rms_norm_eps": 1e-5,
            "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False, "hidden_size": h,
            "intermediate_size": int(r["n_expanded_embd"]), "num_hidden_layers": 2, "num_attention_heads": nh,
            "num_key_value_heads": nkv, "vocab_size": int(r["vocab_size"]), "max_position_embeddings": 4096,
            "rope_theta": 10000.0, "torch_dtype": "float16"}


def model_of(name: str, r: dict, tmp: Path) -> str | None:
    """The graphroof model of Vidur folder *name* (zoo name or config.json path), None where it is skipped."""
    if name in ZOO:
        return ZOO[name]
    if str(r.get("use_gated_mlp", "True")).lower() != "true":
        return None
    path = tmp / name.replace("/", "_") / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(llama_config(r)), encoding="utf-8")
    return str(path)


def score(vidur: Path, models: list[str] | None = None) -> list[tuple[str, str, int, int, float, float]]:
    """(model folder, profile, TP, tokens, measured s, predicted s) of every priced row."""
    from graphroof.hardware import load_hardware
    from graphroof.llm.engine import Engine, Pricing

    root = vidur / "data" / "profiling" / "compute"
    files: dict[str, list[tuple[str, Path]]] = {}  # model folder -> (profile, mlp.csv) on each GPU
    for gpu, prof in PROFILES.items():
        for f in sorted((root / gpu).glob("*/*/mlp.csv")):
            name = f"{f.parent.parent.name}/{f.parent.name}"
            if not ((models and name not in models) or (not models and (gpu, name) in FITTED)):
                files.setdefault(name, []).append((prof, f))
    hws = {prof: load_hardware(prof) for prof in PROFILES.values()}  # one object each: pricing memos key on it
    out = []
    with tempfile.TemporaryDirectory() as td:
        for name, where in files.items():
            by_gpu = [(prof, read_rows(f)) for prof, f in where]
            model = model_of(name, next(iter(by_gpu[0][1].values()))[0][1], Path(td))
            if model is None:
                print(f"{name}: no gated MLP (not a Llama-shaped program): skipped", file=sys.stderr)
                continue
            for tp in sorted({tp for _, rows in by_gpu for tp in rows}):
                # one engine per (model, TP), priced on each GPU's profile (counting and fusion do not depend on
                # the device), as graphroof validate's vidur_ops rows
                eng = Engine(model, hw=hws[where[0][0]], pricing=Pricing(tp=tp, runtime=PRESET), dtype="fp16")
                for prof, rows in by_gpu:
                    if tp not in rows:
                        continue
                    times = layer_kernel_times(eng, [n for n, _ in rows[tp]], [hws[prof]])[0]
                    out += [(name, prof, tp, n, measured_s(r), float(t)) for (n, r), t in zip(rows[tp], times)]
    return out


def send_recv_rows(vidur: Path) -> list[tuple[str, str, int, int, float, float]]:
    """("send/recv intra-node" | "send/recv inter-node", profile, GPUs per node, bytes, measured s, predicted s) of
    Vidur's DGX send / recv tables."""
    from graphroof.hardware import load_hardware
    from graphroof.timing.p2p import send_recv_time

    out = []
    for gpu, prof in GPU_PROFILE.items():
        path = vidur / "data" / "profiling" / "network" / f"{gpu}_dgx" / "send_recv.csv"
        if not path.is_file():
            continue
        hw = load_hardware(prof)
        with path.open(newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                n, g, size = int(r["num_workers"]), int(r["devices_per_node"]), int(r["size"])
                inter = g < n
                t = send_recv_time(size, hw, inter_node=inter, gpus_per_node=g).t_s
                out.append((f"send/recv {'inter' if inter else 'intra'}-node", prof, g, size,
                            float(r["time_stats.send_recv.median"]) * 1e-3, t))
    return out


def summary(rows: list[tuple[str, str, int, int, float, float]]) -> list[str]:
    groups: dict[tuple[str, str], list[float]] = {}
    for name, prof, _, _, meas, pred in rows:
        groups.setdefault((name, prof), []).append(abs(pred / meas - 1))
    groups[("all", "")] = [abs(p / m - 1) for *_, m, p in rows]
    lines = []
    for (name, prof), e in groups.items():
        s = stats_of(e)
        assert s is not None
        lines.append(f"{name:40s} {prof:14s} n {s.n:5d}  median {s.median_abs:6.1%}  p90 {s.p90_abs:6.1%}  "
                     f"worst {s.worst_abs:6.1%}  > 20%: {sum(x > 0.2 for x in e)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vidur", type=Path, required=True, help="a checkout of microsoft/vidur")
    ap.add_argument("--models", help="Vidur model folders, comma-separated (default: every one not fitted on)")
    ap.add_argument("--rows", type=Path, help="write one CSV line per row")
    ap.add_argument("--send-recv", action="store_true", help="also score the DGX send / recv tables")
    a = ap.parse_args(argv)
    if not (a.vidur / "data" / "profiling" / "compute").is_dir():
        print(f"error: {a.vidur} has no data/profiling/compute: give a checkout of microsoft/vidur", file=sys.stderr)
        return 1
    rows = score(a.vidur, a.models.split(",") if a.models else None)
    if a.send_recv:
        rows += send_recv_rows(a.vidur)
    if a.rows:
        with a.rows.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["model", "hw", "tp", "tokens", "measured_s", "predicted_s", "error"])
            w.writerows([*r, r[5] / r[4] - 1] for r in rows)
    print("\n".join(summary(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
