"""Measure kernels and small models on the local NVIDIA GPU, for checking graphroof's predictions against a real device.

What it times (each a CSV in ``--out``):

* ``gemm.csv``: ``torch.mm`` in bf16 and ``torch._scaled_mm`` in fp8 (e4m3, per-tensor scales, bf16 output) over
  Llama-3-8B / 70B linear-layer shapes and a few square / odd ones, M = 1 .. 16384;
* ``attention.csv``: ``F.scaled_dot_product_attention`` forward (flash and cuDNN backends), causal prefill and
  one-token decode;
* ``models.csv``: ResNet-50 (torchvision, random weights, fp16, channels-last) and BERT-base (transformers, from
  its config, fp16, sequence 128) forward passes, eager and replayed from a CUDA graph; a Llama-3-8B-shaped
  decoder (transformers, random bf16 weights) prefill forward, eager;
* ``decode.csv``: a Llama-3-8B-shaped decode step in plain torch ops replayed from a CUDA graph;
* ``grouped.csv``: ``torch._grouped_mm`` Mixtral expert GEMMs;
* ``gqa.csv``: decode attention of a 64 / 8-head GQA layer, native GQA against K/V read once per query head;
* ``stream.csv``: ``torch.sum`` over and a copy of a buffer of 2 MB to 2 GB (L2-resident to DRAM-streaming);
* ``moe_models.csv`` (``--parts moe``): whole Qwen3-30B-A3B and DeepSeek-V2-Lite models from the zoo's configs,
  eager prefill.

``--set unseen`` swaps in the blind set (:data:`UNSEEN`, :data:`GROUPED_UNSEEN`): other models' linear layers at odd
M, head dims 64 / 256, a Llama-2-13B-shaped decoder, ResNet-18 / 101, ViT-B/16, BERT-large, many-expert grouped
GEMMs; it made ``graphroof/validate/data/h200_unseen`` and ``h100_unseen``.  BERT's CUDA-graph rows capture
:func:`unmasked_bert` (the eager program; see its docstring for why not ``BertModel.forward``).

Method: device time from CUDA events around a CUDA-graph replay of ``reps`` back-to-back calls (no host launch
gaps: what an engine that replays graphs sees), after warm-up; the median of ``--trials`` replays divided by
``reps``.  Eager model rows time the Python forward (host dispatch included), median of the trials.  Inputs are
random normal (all-zero inputs draw less power and run faster on Hopper).

This script made the bundled validation rows ``graphroof/validate/data/h100_session`` and ``h200_session`` (scored by
``graphroof validate --dataset torch_gpu``).  ``benchmarks/gpu_measure.py`` is the calibration sibling: it rotates
GEMM weights over copies larger than L2 (cold-cache GEMMs, as a model's layers see them) and adds weight-only int4
and pointwise kernels; here the rows whose operands fit in L2 are marked instead (``operands_fit_l2``).

Run on a GPU machine: ``python tools/measure_gpu.py --out DIR [--quick] [--set unseen] [--parts gemm,models,...]``;
``--smoke`` runs a tiny CPU check of the script's logic (no timing meaning).
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # graphroof (the decoder step of decode.csv)

GEMM_NK = {  # (N, K) of y[M, N] = x[M, K] @ W[K, N]
    "llama3-8b.qkv": (6144, 4096), "llama3-8b.o": (4096, 4096), "llama3-8b.gate_up": (28672, 4096),
    "llama3-8b.down": (4096, 14336), "llama3-70b.qkv": (10240, 8192), "llama3-70b.o": (8192, 8192),
    "llama3-70b.gate_up": (57344, 8192), "llama3-70b.down": (8192, 28672), "square.8192": (8192, 8192),
    "resnet.fc": (1000, 2048), "odd.5120x3000": (5120, 3000),
}
GEMM_M = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)

#: ``--set unseen``: a blind check on shapes, head dims and models that no timing constant was fitted on and no earlier
#: row measured (odd M, other models' linear layers, head dims 64 / 256, MHA decode, ResNet-18 / 101, ViT-B/16,
#: BERT-large, a Llama-2-13B-shaped decoder).  The rows are scored by ``graphroof validate`` like the others.
UNSEEN = {
    "gemm_nk": {"gemma-2-9b.qkv": (8192, 3584), "gemma-2-9b.gate_up": (28672, 3584), "gemma-2-9b.down": (3584, 14336),
                "llama-2-13b.qkv": (15360, 5120), "llama-2-13b.down": (5120, 13824), "bert-large.ffn_in": (4096, 1024),
                "gpt2-xl.qkv": (4800, 1600), "mixtral.lm_head": (32000, 4096)},
    "gemm_m": (1, 3, 16, 48, 100, 384, 1000, 3000, 8192),
    # (batch, heads, head_dim, seq) prefill, (batch, heads, head_dim, context) decode
    "prefill": ((1, 16, 256, 1024), (1, 16, 256, 4096), (4, 16, 64, 512), (1, 25, 64, 2048), (2, 40, 128, 3000)),
    "decode": ((16, 16, 256, 2048), (64, 25, 64, 1024), (8, 40, 128, 3000)),
    "vision": (("resnet-18", "resnet18", (1, 16, 128)), ("resnet-101", "resnet101", (1, 16, 64)),
               ("vit-b-16", "vit_b_16", (1, 16, 64))),
    "encoder": (("bert-large", dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                     intermediate_size=4096), 384, (1, 8, 32)),),
    "llama": ("llama-2-13b-shaped", dict(hidden_size=5120, intermediate_size=13824, num_hidden_layers=40,
                                         num_attention_heads=40, num_key_value_heads=40, vocab_size=32000,
                                         max_position_embeddings=4096, rope_theta=10000.0),
              ((1, 256), (1, 1000), (2, 3000))),
    "decoder": (dict(layers=40, d=5120, inter=13824, heads=40, kv=40, vocab=32000), ((1, 2048), (16, 2048), (48, 1000))),
}


class Timer:
    """Device time of a callable: CUDA-graph replay of ``reps`` calls, CUDA events, median of trials."""

    def __init__(self, device: str, trials: int) -> None:
        self.cuda = device == "cuda"
        self.trials = trials

    def graph(self, fn: Callable[[], Any], reps: int) -> float:
        if not self.cuda:
            return self.eager(fn)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(reps):
                fn()
        g.replay()
        torch.cuda.synchronize()
        times = []
        for _ in range(self.trials):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / 1e3 / reps)
        return statistics.median(times)

    def eager(self, fn: Callable[[], Any], reps: int = 1) -> float:
        for _ in range(3):
            fn()
        self.sync()
        times = []
        for _ in range(self.trials):
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            self.sync()
            times.append((time.perf_counter() - t0) / reps)
        return statistics.median(times)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


def kernels_of(fn: Callable[[], Any]) -> list[tuple[str, int, float]]:
    """(name, calls, device us) of the CUDA kernels one call of *fn* launches (torch.profiler, after one warm-up
    call), longest first."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted(((e.key, e.count, e.device_time_total) for e in prof.key_averages() if e.device_time_total > 0),
                  key=lambda r: -r[2])


def reps_for(flops: float, peak: float = 7e14) -> int:
    """Calls per graph: enough for ~2 ms of work, at most 50."""
    return int(max(1, min(50, 2e-3 / max(flops / peak, 2e-6))))


def l2_bytes(dev: str) -> int:
    """The device's L2 size (PyTorch's reading); 0 on the CPU."""
    return int(torch.cuda.get_device_properties(0).L2_cache_size) if dev == "cuda" else 0


def l2_mark(row: dict, operand_bytes: float, l2: int) -> dict:
    """*row* with its operands' bytes and whether they all fit in L2 (then back-to-back calls re-read them from L2:
    a warm-cache time)."""
    return row | {"operand_bytes": int(operand_bytes), "operands_fit_l2": "yes" if operand_bytes <= l2 else "no"}


def write(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def gemms(t: Timer, dev: str, ms: tuple[int, ...], out: Path, fp8: bool) -> None:
    rows: list[dict] = []
    l2 = l2_bytes(dev)
    for name, (n, k) in GEMM_NK.items():
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        for m in ms:
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            y = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
            r = reps_for(2.0 * m * n * k)
            wt = w.t()
            ts = t.graph(lambda x=x, wt=wt, y=y: torch.mm(x, wt, out=y), r)
            rows.append(l2_mark({"shape": name, "dtype": "bf16", "M": m, "N": n, "K": k, "reps": r, "time_s": ts,
                                 "tflops": 2.0 * m * n * k / ts / 1e12}, 2 * (m * k + n * k + m * n), l2))
            if fp8 and dev == "cuda" and k % 16 == 0 and n % 16 == 0:
                try:
                    x8 = x.to(torch.float8_e4m3fn)
                    w8 = w.to(torch.float8_e4m3fn)
                    one = torch.ones((), device=dev, dtype=torch.float32)
                    w8t = w8.t()
                    t8 = t.graph(lambda x8=x8, w8t=w8t, one=one: torch._scaled_mm(
                        x8, w8t, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), r)
                    rows.append(l2_mark({"shape": name, "dtype": "fp8", "M": m, "N": n, "K": k, "reps": r,
                                         "time_s": t8, "tflops": 2.0 * m * n * k / t8 / 1e12},
                                        m * k + n * k + 2 * m * n, l2))
                except Exception as exc:  # noqa: BLE001 - record why a shape is not measured
                    print(f"fp8 {name} M={m}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
        print(f"gemm {name} done", flush=True)
        write(out / "gemm.csv", rows)
        if dev == "cuda":
            torch.cuda.empty_cache()


def attention(t: Timer, dev: str, out: Path, quick: bool, unseen: bool = False) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rows: list[dict] = []
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    dt = torch.bfloat16 if dev == "cuda" else torch.float32
    l2 = l2_bytes(dev)
    prefill = [(b, 32, 128, s) for b, s in [(1, s) for s in ((512, 2048) if quick else (512, 1024, 2048, 4096, 8192,
                                                                                          16384))] + [(8, 2048)]]
    dec = [(b, 32, 128, ctx) for b in ((1, 64) if quick else (1, 8, 32, 128)) for ctx in (1024, 4096)]
    if unseen:
        prefill, dec = list(UNSEEN["prefill"]), list(UNSEEN["decode"])
    for b, heads, hd, s in prefill:
        q, k, v = (torch.randn(b, heads, s, hd, device=dev, dtype=dt) for _ in range(3))
        for causal in (True, False):
            flops = 4.0 * b * heads * s * s * hd * (0.5 if causal else 1.0)
            for bname, be in backends.items():
                try:
                    with sdpa_kernel([be]):
                        ts = t.graph(lambda q=q, k=k, v=v, c=causal: F.scaled_dot_product_attention(q, k, v, is_causal=c),
                                     reps_for(flops))
                except Exception as exc:  # noqa: BLE001
                    print(f"attn {bname} b={b} s={s}: {type(exc).__name__}", flush=True)
                    continue
                rows.append(l2_mark({"kind": "prefill", "backend": bname, "batch": b, "heads": heads,
                                     "kv_heads": heads, "q_len": s, "kv_len": s, "head_dim": hd, "causal": causal,
                                     "time_s": ts, "tflops": flops / ts / 1e12},
                                    2 * (2 * b * heads * s * hd + 2 * b * heads * s * hd), l2))
    for b, heads, hd, ctx in dec:
        q = torch.randn(b, heads, 1, hd, device=dev, dtype=dt)
        k, v = (torch.randn(b, heads, ctx, hd, device=dev, dtype=dt) for _ in range(2))
        kv_bytes = 2.0 * b * heads * ctx * hd * k.element_size()
        for bname, be in backends.items():
            try:
                with sdpa_kernel([be]):
                    ts = t.graph(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v), 20)
            except Exception as exc:  # noqa: BLE001
                print(f"decode {bname} b={b} ctx={ctx}: {type(exc).__name__}", flush=True)
                continue
            rows.append(l2_mark({"kind": "decode", "backend": bname, "batch": b, "heads": heads,
                                 "kv_heads": heads, "q_len": 1, "kv_len": ctx, "head_dim": hd, "causal": False,
                                 "time_s": ts, "tflops": kv_bytes / ts / 1e12},  # decode: TB/s of K/V read
                                2 * (2 * b * heads * hd + 2 * b * heads * ctx * hd), l2))
    write(out / "attention.csv", rows)
    print("attention done", flush=True)


def models(t: Timer, dev: str, out: Path, quick: bool, unseen: bool = False) -> None:
    rows: list[dict] = []
    cuda = dev == "cuda"
    dt = torch.float16 if cuda else torch.float32
    torch.backends.cudnn.benchmark = True

    def record(model: str, mode: str, batch: int, seq: int, run: Callable[[], float]) -> None:
        try:
            ts = run()
        except Exception as exc:  # noqa: BLE001 - a capture that fails (host sync in the model) is noted
            print(f"{model} {mode} b={batch}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
            return
        rows.append({"model": model, "mode": mode, "dtype": str(dt).split(".")[-1], "batch": batch, "seq": seq,
                     "time_s": ts, "per_s": batch / ts})
        print(f"{model} {mode} b={batch} s={seq}: {ts * 1e3:.3f} ms", flush=True)
        write(out / "models.csv", rows)

    def both(name: str, batch: int, seq: int, fn: Callable[[], Any], graph_fn: Callable[[], Any] | None = None) -> None:
        with torch.inference_mode():
            record(name, "eager", batch, seq, lambda: t.eager(fn, reps=5))
        with torch.no_grad():
            record(name, "cuda-graph", batch, seq, lambda: t.graph(graph_fn or fn, 3))

    small = (1,) if not cuda else (1, 32) if quick else None
    vision = UNSEEN["vision"] if unseen else (("resnet-50", "resnet50", (1, 8, 32, 128, 256)),)
    encoders = UNSEEN["encoder"] if unseen else (("bert-base", {}, 128, (1, 8, 32, 128)),)
    for name, ctor, batches in vision:  # type: ignore[misc]
        try:
            import torchvision

            net = getattr(torchvision.models, ctor)(weights=None).to(dev, dt).eval()
            if cuda:
                net = net.to(memory_format=torch.channels_last)
            for b in small or batches:
                x = torch.randn(b, 3, 224, 224, device=dev, dtype=dt)
                if cuda:
                    x = x.to(memory_format=torch.channels_last)
                both(name, b, 224, lambda x=x, net=net: net(x))
        except Exception as exc:  # noqa: BLE001
            print(f"{name}: {type(exc).__name__}: {exc}", flush=True)
    for name, cfg_kw, seq, batches in encoders:  # type: ignore[misc]
        try:
            from transformers import BertConfig, BertModel

            bert = BertModel(BertConfig(attn_implementation="sdpa", **cfg_kw)).to(dev, dt).eval()
            for b in small or batches:
                ids = torch.randint(0, 30000, (b, seq), device=dev)
                both(name, b, seq, lambda ids=ids, bert=bert: bert(input_ids=ids),
                     lambda ids=ids, bert=bert: unmasked_bert(bert, ids) if unseen else bert(input_ids=ids))
        except Exception as exc:  # noqa: BLE001
            print(f"{name}: {type(exc).__name__}: {exc}", flush=True)
    if not cuda:
        return
    if unseen:
        llama_name, llama_kw, cases = UNSEEN["llama"]  # type: ignore[misc]
    else:
        llama_name, cases = "llama-3-8b-shaped", ((1, 128), (1, 512), (1, 2048), (1, 8192), (4, 2048))
        llama_kw = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                        num_key_value_heads=8, vocab_size=128256, max_position_embeddings=16384, rope_theta=500000.0)
    try:
        from transformers import LlamaConfig, LlamaForCausalLM

        cfg = LlamaConfig(attn_implementation="sdpa", torch_dtype=torch.bfloat16, **llama_kw)
        llm = bf16_model(dev, lambda: LlamaForCausalLM(cfg))
        eager_prefill(t, dev, llm, llama_name, ((1, 512), (1, 2048)) if quick else cases, rows, out / "models.csv")
        llm = None  # type: ignore[assignment]
        torch.cuda.empty_cache()
    except Exception as exc:  # noqa: BLE001
        print(f"llama: {type(exc).__name__}: {exc}", flush=True)


def bf16_model(dev: str, build: Callable[[], Any]) -> Any:
    """``build()`` on *dev* with bf16 as the default dtype (random weights made in bf16 where they live), in eval
    mode; the default dtype restored whatever happens."""
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(dev):
            return build().eval()
    finally:
        torch.set_default_dtype(torch.float32)


def eager_prefill(t: Timer, dev: str, llm: Any, name: str, cases: Any, rows: list[dict], path: Path,
                  **extra: Any) -> None:
    """Time *llm*'s eager prefill (``use_cache=False``, the last token's logits only) at each (batch, seq) of
    *cases*: one row each (*extra* columns added), appended to *rows* and written to *path* as it goes."""
    for b, s in cases:
        ids = torch.randint(0, 30000, (b, s), device=dev)
        with torch.inference_mode():
            ts = t.eager(lambda ids=ids: llm(input_ids=ids, use_cache=False, logits_to_keep=1))
        rows.append({"model": name, "mode": "eager-prefill", "dtype": "bfloat16", "batch": b, "seq": s,
                     "time_s": ts, "per_s": b * s / ts, **extra})
        print(f"{name} prefill b={b} s={s}: {ts * 1e3:.2f} ms", flush=True)
        write(path, rows)


def unmasked_bert(bert: Any, ids: torch.Tensor) -> torch.Tensor:
    """BertModel's forward as eager mode runs it: embeddings, encoder with no attention mask, pooler.

    Called with no mask, BertModel makes an all-ones padding mask and drops it when every entry is 1, so eager SDPA
    runs the fused (cuDNN / flash) kernel.  Under CUDA-graph capture transformers skips that check (its
    ``is_tracing()`` counts stream capture, where the check's host sync is illegal) and keeps the mask: the captured
    program then runs SDPA's math path, fp32 score GEMMs and softmax plus mask kernels (profiled on the H200,
    BERT-large batch 8 seq 384: 16.8 ms replayed against 8.1 ms eager).  This graph function runs the eager program."""
    return bert.pooler(bert.encoder(bert.embeddings(input_ids=ids)).last_hidden_state)


def moe_models(t: Timer, dev: str, out: Path) -> None:
    """``--parts moe`` (``--set unseen``): whole MoE models from the zoo's configs (graphroof/frontends/zoo_configs,
    transformers, random bf16 weights, SDPA), eager prefill (``use_cache=False``, logits of the last token only),
    with transformers' default experts implementation (recorded in ``experts_impl``) -> ``moe_models.csv``."""
    import json

    from transformers import AutoConfig, AutoModelForCausalLM

    rows: list[dict] = []
    zoo = Path(__file__).resolve().parents[1] / "graphroof" / "frontends" / "zoo_configs"
    for name in ("qwen3-30b-a3b", "deepseek-v2-lite"):
        try:
            raw = json.loads((zoo / f"{name}.json").read_text())
            kind = raw.pop("model_type")
            raw.pop("architectures", None)
            cfg = AutoConfig.for_model(kind, **raw)
            cfg._attn_implementation = "sdpa"
            llm = bf16_model(dev, lambda cfg=cfg: AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16))
            impl = getattr(llm.config, "_experts_implementation", "?")
            eager_prefill(t, dev, llm, f"{name}-shaped", ((1, 512), (1, 2048), (4, 2048)), rows,
                          out / "moe_models.csv", experts_impl=impl)
            llm = None  # type: ignore[assignment]
            torch.cuda.empty_cache()
        except Exception as exc:  # noqa: BLE001
            print(f"{name}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)


class Decoder:
    """A Llama-3-8B-shaped decoder step in plain torch ops (no fusion): embedding, per layer RMSNorm, fused QKV
    GEMM, K/V written into a static cache at one position, SDPA over the whole cache (GQA), output GEMM, RMSNorm,
    fused gate/up GEMM, SiLU x up, down GEMM; final norm and LM head.  Random bf16 weights.  The module is
    graphroof.frontends.torch.decoder_step's, the one graphroof.analyze prices for these rows."""

    def __init__(self, dev: str, batch: int, ctx: int, **dims: int) -> None:
        from graphroof.frontends.torch.decoder_step import decoder_step

        self.module, self.inputs = decoder_step(batch, ctx, "llama-3-8b", device=dev, init=True, **dims)

    def step(self) -> torch.Tensor:
        return self.module(*self.inputs)


def decode(t: Timer, dev: str, out: Path, quick: bool, unseen: bool = False) -> None:
    rows: list[dict] = []
    cases = ((1, 1024), (64, 1024)) if quick else ((1, 1024), (8, 1024), (32, 1024), (64, 1024), (128, 1024),
                                                    (256, 1024), (1, 4096), (16, 4096), (64, 4096))
    name, dims = "llama-3-8b-shaped", {}
    if unseen:
        name, (dims, cases) = "llama-2-13b-shaped", UNSEEN["decoder"]  # type: ignore[assignment]
    for b, ctx in cases:
        try:
            m = Decoder(dev, b, ctx, **dims)
            with torch.no_grad():
                ts = t.graph(m.step, 1)
        except Exception as exc:  # noqa: BLE001
            print(f"decode b={b} ctx={ctx}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
            continue
        rows.append({"model": name, "mode": "decode-cuda-graph", "dtype": "bfloat16", "batch": b,
                     "context": ctx, "time_s": ts, "tokens_per_s": b / ts})
        print(f"decode b={b} ctx={ctx}: {ts * 1e3:.3f} ms", flush=True)
        write(out / "decode.csv", rows)
        m = None  # type: ignore[assignment]
        if dev == "cuda":
            torch.cuda.empty_cache()


#: grouped (MoE expert) GEMMs: name -> (experts, K, N, top_k); the default set is Mixtral-8x7B's, ``--set unseen``
#: adds many-expert models (Qwen3-30B-A3B: 128 experts of 768, top-8; DeepSeek-V2-Lite: 64 experts of 1408, top-6)
GROUPED = {"mixtral.gate_up": (8, 4096, 2 * 14336, 2), "mixtral.down": (8, 14336, 4096, 2)}
GROUPED_UNSEEN = {"qwen3-30b-a3b.gate_up": (128, 2048, 2 * 768, 8), "qwen3-30b-a3b.down": (128, 768, 2048, 8),
                  "deepseek-v2-lite.gate_up": (64, 2048, 2 * 1408, 6), "deepseek-v2-lite.down": (64, 1408, 2048, 6)}


def grouped(t: Timer, dev: str, out: Path, unseen: bool = False) -> None:
    """``torch._grouped_mm`` (bf16, Hopper): expert GEMMs (:data:`GROUPED`), tokens x top-k rows spread evenly over
    the experts (the first ``rows % experts`` experts one row more; with fewer rows than experts, the rest none)."""
    import itertools

    rows: list[dict] = []
    shapes = GROUPED_UNSEEN if unseen else GROUPED
    tokens_set = (1, 16, 128, 1024, 4096, 16384) if unseen else (1, 8, 64, 512, 2048, 8192)
    for name, (experts, k, n, top_k) in shapes.items():
        w = torch.randn(experts, n, k, device=dev, dtype=torch.bfloat16).transpose(-2, -1)
        for tokens in tokens_set:
            rows_total = top_k * tokens
            per = [rows_total // experts + (1 if i < rows_total % experts else 0) for i in range(experts)]
            offs = torch.tensor(list(itertools.accumulate(per)), device=dev, dtype=torch.int32)
            x = torch.randn(rows_total, k, device=dev, dtype=torch.bfloat16)
            flops = 2.0 * rows_total * n * k
            try:
                ts = t.graph(lambda x=x, offs=offs, w=w: torch._grouped_mm(x, w, offs=offs), reps_for(flops))
            except Exception as exc:  # noqa: BLE001
                print(f"grouped {name} T={tokens}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
                continue
            rows.append({"shape": name, "experts": experts, "tokens": tokens, "top_k": top_k, "K": k, "N": n,
                         "time_s": ts, "tflops": flops / ts / 1e12})
            print(f"grouped {name} T={tokens}: {ts * 1e6:.1f} us", flush=True)
        write(out / "grouped.csv", rows)


def stream(t: Timer, dev: str, out: Path) -> None:
    """Read bandwidth by working-set size: ``x.sum()`` over a bf16 buffer replayed back to back (a buffer that fits
    in L2 is re-read from L2 after the first call), and a copy (read + write) of the same buffer."""
    rows: list[dict] = []
    for mb in (2, 4, 8, 16, 24, 32, 40, 48, 64, 128, 512, 2048):
        n = mb * 1_000_000 // 2
        x = torch.randn(n, device=dev, dtype=torch.bfloat16)
        y = torch.empty_like(x)
        acc = torch.empty((), device=dev, dtype=torch.float32)
        ts = t.graph(lambda x=x, acc=acc: torch.sum(x, dim=0, dtype=torch.float32, out=acc), 50)
        tc = t.graph(lambda x=x, y=y: y.copy_(x), 50)
        rows.append({"bytes": 2 * n, "sum_time_s": ts, "sum_read_bytes_per_s": 2 * n / ts, "copy_time_s": tc,
                     "copy_bytes_per_s": 4 * n / tc})
        print(f"{mb} MB: sum {2 * n / ts / 1e12:.2f} TB/s, copy {4 * n / tc / 1e12:.2f} TB/s", flush=True)
    write(out / "stream.csv", rows)


def gqa(t: Timer, dev: str, out: Path) -> None:
    """Decode attention of a GQA layer (64 query heads, 8 K/V heads of 128: Llama-2/3-70B on one GPU): the flash
    kernel with native GQA (each K/V head read once) against K/V expanded to 64 heads as a stride-0 view (each K/V
    head read by its 8 query heads: re-reads served from L2 when they hit)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rows: list[dict] = []
    h, kvh, hd = 64, 8, 128
    for b in (1, 8, 32, 64):
        for ctx in (1024, 4096):
            q = torch.randn(b, h, 1, hd, device=dev, dtype=torch.bfloat16)
            k, v = (torch.randn(b, kvh, ctx, hd, device=dev, dtype=torch.bfloat16) for _ in range(2))
            # (batch x K/V head) as the batch, the group's query heads as heads, K/V a stride-0 view over them
            qg = q.view(b * kvh, h // kvh, 1, hd)
            ke, ve = (x.view(b * kvh, 1, ctx, hd).expand(b * kvh, h // kvh, ctx, hd) for x in (k, v))
            kv_bytes = 2.0 * b * kvh * ctx * hd * 2
            for mode, fn in (("native-gqa", lambda q=q, k=k, v=v: F.scaled_dot_product_attention(
                                 q, k, v, enable_gqa=True)),
                             ("expanded-view", lambda q=qg, k=ke, v=ve: F.scaled_dot_product_attention(q, k, v))):
                try:
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                        ts = t.graph(fn, 20)
                except Exception as exc:  # noqa: BLE001
                    print(f"gqa {mode} b={b} ctx={ctx}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
                    continue
                rows.append({"mode": mode, "batch": b, "heads": h, "kv_heads": kvh, "kv_len": ctx, "head_dim": hd,
                             "time_s": ts, "kv_bytes": kv_bytes, "kv_bytes_per_s": kv_bytes / ts,
                             "kv_stride_heads": ke.stride(1) if mode == "expanded-view" else k.stride(1)})
                print(f"gqa {mode} b={b} ctx={ctx}: {ts * 1e6:.1f} us", flush=True)
    write(out / "gqa.csv", rows)


def gpu_run_dir(path: str) -> Path:
    """The output folder of a run on the GPU (the probe tools' start): a one-line error and exit when there is no
    CUDA device (nothing made), else the folder made and its ``env.txt`` written."""
    if not torch.cuda.is_available():
        sys.exit("error: no CUDA device")
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    environment(out, "cuda")
    return out


def environment(out: Path, dev: str) -> None:
    lines = [f"python {platform.python_version()}", f"torch {torch.__version__}",
             f"time {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}"]
    if dev == "cuda":
        p = torch.cuda.get_device_properties(0)
        lines += [f"device {p.name}", f"sms {p.multi_processor_count}", f"memory_bytes {p.total_memory}",
                  f"cuda {torch.version.cuda}", f"cudnn {torch.backends.cudnn.version()}"]
        try:
            lines.append(subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,"
                                         "clocks.max.mem,power.limit", "--format=csv"],
                                        capture_output=True, text=True, timeout=20).stdout)
        except Exception as exc:  # noqa: BLE001
            lines.append(f"nvidia-smi: {exc}")
    (out / "env.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "measured_out"))
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="tiny CPU run of the script's logic")
    ap.add_argument("--parts", default="gemm,attention,decode,grouped,gqa,stream,models")
    ap.add_argument("--set", choices=("default", "unseen"), default="default",
                    help="unseen: the blind-check shapes and models of UNSEEN instead of the calibration-era ones")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = "cpu" if a.smoke or not torch.cuda.is_available() else "cuda"
    if dev == "cpu" and not a.smoke:
        sys.exit("error: no CUDA device; use --smoke for a CPU check of the script")
    t = Timer(dev, 2 if a.smoke else a.trials)
    environment(out, dev)
    parts = set(a.parts.split(","))
    unseen = a.set == "unseen"
    t0 = time.perf_counter()
    if "gemm" in parts:
        global GEMM_NK
        ms = UNSEEN["gemm_m"] if unseen else GEMM_M
        if unseen:
            GEMM_NK = UNSEEN["gemm_nk"]  # type: ignore[assignment]
        if a.smoke:
            GEMM_NK = {"tiny": (64, 32)}
        gemms(t, dev, (1, 16) if a.smoke else (ms[::2] if a.quick else ms), out, fp8=True)  # type: ignore[index]
        print(f"gemm part {time.perf_counter() - t0:.1f} s", flush=True)
    if "attention" in parts and not a.smoke:
        attention(t, dev, out, a.quick, unseen)
        print(f"attention part {time.perf_counter() - t0:.1f} s", flush=True)
    if "decode" in parts and not a.smoke:
        decode(t, dev, out, a.quick, unseen)
        print(f"decode part {time.perf_counter() - t0:.1f} s", flush=True)
    if "grouped" in parts and not a.smoke:
        grouped(t, dev, out, unseen)
        print(f"grouped part {time.perf_counter() - t0:.1f} s", flush=True)
    if "gqa" in parts and not a.smoke:
        gqa(t, dev, out)
    if "stream" in parts and not a.smoke:
        stream(t, dev, out)
    if "moe" in parts and not a.smoke:
        moe_models(t, dev, out)
        print(f"moe part {time.perf_counter() - t0:.1f} s", flush=True)
    if "models" in parts:
        models(t, dev, out, a.quick or a.smoke, unseen)
        print(f"models part {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
