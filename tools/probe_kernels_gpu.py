"""Probe three kernel regimes on the local NVIDIA GPU that graphroof's bundled rows leave open.

* ``naive``: unfused attention as FlashAttention's ``benchmarks/benchmark_flash_attention.py`` times its "Pytorch"
  baseline (fp16, q / k / v from one packed [batch, seq, 3, heads, dim] tensor that requires grad, a scaled batched
  Q K^T into a preallocated score buffer, softmax over the keys, dropout 0, P V; forward only): the bundled B200 rows
  of that benchmark (graphroof/validate/data/kernels.csv, FlashAttention issue 1589) run 37-61% slower than graphroof's
  naive byte model.  Each shape is timed (CUDA events around eager calls, median) and profiled (every kernel's
  name and device time);
* ``stream``: PyTorch elementwise kernels on contiguous, broadcast and strided operands (the TensorIterator paths a
  transformers MoE layer runs: routing-weight multiply, sentinel masked_fill, SiLU of a gate half, top-k sum,
  token gather), timed from CUDA-graph replays, to measure what each path streams;
* ``grouped``: ``torch._grouped_mm`` (Mixtral gate+up) at 64-128 rows per expert, where the H200 ran faster than the
  per-SM limit fitted on the H100 (tools/probe_moe_gpu.py), and the same at 128 rows on 1-8 experts;
* ``softmax``: ``torch.softmax`` over the last dim of a contiguous [rows, dim] tensor across PyTorch's kernel edges
  (the warp kernel up to 2048 elements, ``cunn_SoftMaxForwardReg<k>`` with k = ceil(dim / 1024) < 10, then the
  shared-memory kernel), fp16 / bf16 / fp32, at a fixed 2^28 elements and across row counts, plus the
  ``softmax(x, dtype=float32).to(x.dtype)`` form of transformers' eager attention; each timed from a CUDA-graph
  replay and profiled (kernel name);
* ``router``: a MoE router's small kernels (top-k of [tokens, experts] fp32 logits, the sort of the chosen expert ids);
* ``decode``: the decode step of ``decode.csv`` (graphroof.frontends.torch.decoder_step, Llama-3-8B shape, context
  1,024) at batch 1, 8, 32 and 64: its CUDA-graph replay time, every kernel's name, calls and device time, and the
  SDPA backend PyTorch picks for the step's own Q / K / V views (graphroof prices batch 8-64 about 0.5-0.7 ms a
  step too fast and batch 1 within 4%: which kernels grow with the batch).

Run on a GPU machine: ``python3 tools/probe_kernels_gpu.py --out DIR [--parts naive,stream,grouped,decode]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.measure_gpu import Timer, gpu_run_dir, kernels_of, write  # noqa: E402

#: (head dim, heads, [(batch, seq)]): the benchmark's shapes (model width 2048: heads = 2048 / head dim)
NAIVE = ((64, 32, ((32, 512), (16, 1024), (8, 2048), (4, 4096), (2, 8192), (1, 16384))),
         (128, 16, ((32, 512), (16, 1024), (8, 2048), (4, 4096), (2, 8192))))


def naive_attention(qkv: torch.Tensor) -> torch.Tensor:
    """Unfused attention over a packed [b, s, 3, h, d] tensor, as the benchmark's baseline computes it."""
    b, s, _, h, d = qkv.shape
    q, k, v = qkv.unbind(dim=2)
    q = q.transpose(1, 2).reshape(b * h, s, d)
    k = k.permute(0, 2, 3, 1).reshape(b * h, d, s)
    scores = torch.empty(b * h, s, s, dtype=qkv.dtype, device=qkv.device)
    scores = torch.baddbmm(scores, q, k, beta=0, alpha=1.0 / math.sqrt(d)).view(b, h, s, s)
    probs = F.dropout(torch.softmax(scores, dim=-1), 0.0)
    return torch.einsum("bhts,bhsd->bhtd", probs, v.transpose(1, 2)).to(qkv.dtype)


def event_time(fn: Callable[[], Any], reps: int = 10, trials: int = 5) -> float:
    """Seconds per call of *fn* run eagerly: CUDA events around *reps* calls, the median of *trials*."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(trials):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / 1e3 / reps)
    return statistics.median(out)


def naive(out: Path) -> None:
    rows, prof = [], []
    for d, h, shapes in NAIVE:
        for b, s in shapes:
            try:
                qkv = torch.randn(b, s, 3, h, d, device="cuda", dtype=torch.float16, requires_grad=True)
                fn = lambda qkv=qkv: naive_attention(qkv)  # noqa: E731
                ts = event_time(fn)
                ks = kernels_of(fn)
            except Exception as exc:  # noqa: BLE001
                print(f"naive d={d} b={b} s={s}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
                continue
            flops = 4.0 * b * h * s * s * d
            rows.append({"headdim": d, "nheads": h, "batch": b, "seqlen": s, "causal": False, "direction": "fwd",
                         "time_s": ts, "tflops": flops / ts / 1e12, "score_bytes": 2 * b * h * s * s})
            print(f"naive d={d} b={b} s={s}: {ts * 1e3:.3f} ms, {flops / ts / 1e12:.1f} TFLOP/s", flush=True)
            for key, calls, us in ks:
                prof.append({"headdim": d, "batch": b, "seqlen": s, "kernel": key[:200], "calls": calls,
                             "device_us": us})
            qkv = None
            torch.cuda.empty_cache()
            write(out / "naive_attention.csv", rows)
    write(out / "naive_attention_kernels.csv", prof)


def _stream_cases(s_rows: int) -> list[tuple[str, int, int, Callable[[], Any]]]:
    """(name, columns, bytes moved, fn) of each elementwise path at *s_rows* rows (a MoE layer's tokens x top-k)."""
    bf = torch.bfloat16
    hdim, inter, topk = 2048, 768, 8
    x = torch.randn(s_rows, hdim, device="cuda", dtype=bf)
    y = torch.randn(s_rows, hdim, device="cuda", dtype=bf)
    w = torch.rand(s_rows, device="cuda", dtype=bf)
    mask = torch.rand(s_rows, 1, device="cuda") < 0.01
    gu = torch.randn(s_rows, 2 * inter, device="cuda", dtype=bf)
    g, u = gu.chunk(2, dim=-1)  # strided halves (row stride 2 x inter)
    gc, uc = g.contiguous(), u.contiguous()
    tok = s_rows // topk
    r3 = torch.randn(tok, topk, hdim, device="cuda", dtype=bf)
    idx = torch.randint(0, tok, (s_rows,), device="cuda")
    src = torch.randn(tok, hdim, device="cuda", dtype=bf)
    e = x.numel() * 2  # bytes of one [S, H] bf16 tensor
    ei = g.numel() * 2
    return [
        ("mul contiguous", hdim, 3 * e, lambda: x * y),
        ("mul broadcast [S,1]", hdim, 2 * e + s_rows * 2, lambda: x * w[:, None]),
        ("masked_fill broadcast [S,1]", hdim, 2 * e + s_rows, lambda: x.masked_fill(mask, 0.0)),
        ("masked_fill_ broadcast [S,1] in place", hdim, 2 * e + s_rows, lambda: x.masked_fill_(mask, 0.0)),
        ("copy contiguous", hdim, 2 * e, lambda: x.clone()),
        ("silu strided half", inter, 2 * ei, lambda: F.silu(g)),
        ("silu contiguous", inter, 2 * ei, lambda: F.silu(gc)),
        ("mul strided halves", inter, 3 * ei, lambda: g * u),
        ("mul contiguous halves", inter, 3 * ei, lambda: gc * uc),
        ("sum top-k [T,8,H] dim 1", hdim, r3.numel() * 2 + tok * hdim * 2, lambda: r3.sum(dim=1)),
        ("gather rows src[idx]", hdim, 2 * e + s_rows * 8, lambda: src[idx]),
        ("to fp32 contiguous", hdim, e + 2 * e, lambda: x.float()),
        ("add contiguous", hdim, 3 * e, lambda: x + y),
    ]


def stream(t: Timer, out: Path) -> None:
    """Elementwise paths (:func:`_stream_cases`), each timed from a CUDA-graph replay of 20 calls."""
    rows = []
    for s_rows in (16384, 65536):
        for name, cols, nbytes, fn in _stream_cases(s_rows):
            try:
                ts = t.graph(fn, 20)
            except Exception as exc:  # noqa: BLE001
                print(f"stream {name} S={s_rows}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
                continue
            kname = kernels_of(fn)[0][0][:160]
            rows.append({"case": name, "rows": s_rows, "cols": cols, "bytes": nbytes, "time_s": ts,
                         "bytes_per_s": nbytes / ts, "kernel": kname})
            print(f"stream {name} S={s_rows}: {ts * 1e6:.1f} us, {nbytes / ts / 1e12:.2f} TB/s  [{kname[:70]}]",
                  flush=True)
        torch.cuda.empty_cache()
        write(out / "stream_paths.csv", rows)


def grouped(t: Timer, out: Path) -> None:
    e, k, n = 8, 4096, 28672
    w = torch.randn(e, n, k, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
    rows = []
    cases = [(8, p) for p in (64, 72, 80, 88, 96, 104, 112, 120, 127, 128)] + [(1, 128), (2, 128), (4, 128)]
    for touched, per in cases:
        counts = [per if i < touched else 0 for i in range(e)]
        offs = torch.tensor(list(itertools.accumulate(counts)), device="cuda", dtype=torch.int32)
        x = torch.randn(touched * per, k, device="cuda", dtype=torch.bfloat16)
        ts = t.graph(lambda x=x, offs=offs: torch._grouped_mm(x, w, offs=offs), 20)
        wbytes = touched * k * n * 2
        rows.append({"shape": "mixtral.gate_up", "experts": e, "experts_touched": touched, "rows_per_expert": per,
                     "rows": touched * per, "K": k, "N": n, "time_s": ts, "weight_bytes_touched": wbytes,
                     "weight_bytes_per_s": wbytes / ts, "tflops": 2.0 * touched * per * n * k / ts / 1e12})
        print(f"grouped touched={touched} per={per}: {ts * 1e6:.1f} us, {wbytes / ts / 1e12:.2f} TB/s", flush=True)
    write(out / "grouped_edge.csv", rows)


#: softmax widths across the kernel edges (module doc)
SOFTMAX_DIMS = (256, 512, 1024, 1536, 2048, 2112, 3072, 4096, 4224, 6144, 8192, 9216, 9344, 12288, 16384, 24576,
                32768)
SOFTMAX_ELEMENTS = 1 << 28


def _softmax_row(t: Timer, name: str, x: torch.Tensor, fn: Callable[[], Any], nbytes: float) -> dict:
    reps = max(1, min(20, int(2e-3 / max(nbytes / 3e12, 2e-6))))
    ts = t.graph(fn, reps)
    ks = kernels_of(fn)
    rows, dim = x.shape
    print(f"softmax {name} {x.dtype} rows={rows} dim={dim}: {ts * 1e6:.1f} us, {nbytes / ts / 1e12:.2f} TB/s "
          f"[{ks[0][0][:60]}] x{len(ks)}", flush=True)
    return {"case": name, "dtype": str(x.dtype).replace("torch.", ""), "rows": rows, "dim": dim, "bytes": nbytes,
            "time_s": ts, "bytes_per_s": nbytes / ts, "kernels": len(ks), "kernel": ks[0][0][:160],
            "kernel_us": ks[0][2], "all_kernels_us": sum(k[2] for k in ks)}


def softmax(t: Timer, out: Path) -> None:
    """torch.softmax across its kernel edges (module doc)."""
    rows = []
    cases = [(torch.float16, d, SOFTMAX_ELEMENTS // d) for d in SOFTMAX_DIMS]
    cases += [(dt, d, SOFTMAX_ELEMENTS // d) for dt in (torch.bfloat16, torch.float32)
              for d in (1024, 2048, 4096, 8192, 16384)]
    cases += [(torch.float16, d, r) for d in (4096, 8192) for r in (66, 132, 264, 528, 1056, 2112, 8448)]
    for dt, d, r in cases:
        try:
            x = torch.randn(r, d, device="cuda", dtype=dt)
            rows.append(_softmax_row(t, "softmax", x, lambda x=x: torch.softmax(x, dim=-1), 2.0 * x.numel() * x.element_size()))
        except Exception as exc:  # noqa: BLE001
            print(f"softmax {dt} {r}x{d}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
        write(out / "softmax.csv", rows)
    for d in (512, 2048, 4096, 8192):  # transformers' eager attention: fp32 softmax of bf16 scores, cast back
        x = torch.randn(SOFTMAX_ELEMENTS // 4 // d, d, device="cuda", dtype=torch.bfloat16)
        fn = lambda x=x: torch.softmax(x, dim=-1, dtype=torch.float32).to(x.dtype)  # noqa: E731
        rows.append(_softmax_row(t, "softmax fp32 of bf16, cast back", x, fn, x.numel() * 2 * 2.0))
        write(out / "softmax.csv", rows)
    torch.cuda.empty_cache()


def router(t: Timer, out: Path) -> None:
    """A MoE router's top-k and expert-id sort (module doc), each timed from a CUDA-graph replay."""
    rows = []
    for tokens in (512, 2048, 8192, 16384):
        for experts, k in ((8, 2), (64, 6), (128, 8)):
            logits = torch.randn(tokens, experts, device="cuda", dtype=torch.float32)
            ids = torch.randint(0, experts, (tokens * k,), device="cuda")
            for name, fn in (("topk", lambda lg=logits, k=k: torch.topk(lg, k, dim=-1)),
                             ("sort ids", lambda ids=ids: torch.sort(ids)),
                             ("argsort ids stable", lambda ids=ids: torch.argsort(ids, stable=True)),
                             ("softmax logits", lambda lg=logits: torch.softmax(lg, dim=-1))):
                try:
                    ts = t.graph(fn, 20)
                    ks = kernels_of(fn)
                except Exception as exc:  # noqa: BLE001
                    print(f"router {name} T={tokens} E={experts}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
                    continue
                rows.append({"case": name, "tokens": tokens, "experts": experts, "top_k": k, "time_s": ts,
                             "kernels": sum(c for _, c, _ in ks), "kernel": ks[0][0][:160],
                             "all_kernels_us": sum(x[2] for x in ks)})
                print(f"router {name} T={tokens} E={experts} k={k}: {ts * 1e6:.1f} us, {len(ks)} kernel kinds "
                      f"[{ks[0][0][:50]}]", flush=True)
        write(out / "router.csv", rows)


#: (batch, context) of the decode part: the batch 1 and 8-64 rows of h200_session/decode.csv
DECODE = ((1, 1024), (8, 1024), (32, 1024), (64, 1024))


def sdpa_backend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> str:
    """The SDPA backend PyTorch picks for these tensors with ``enable_gqa`` (its dispatcher, no kernel run)."""
    try:
        choice = torch._fused_sdp_choice(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                         enable_gqa=True)
        return torch.nn.attention.SDPBackend(choice).name
    except Exception as exc:  # noqa: BLE001 - a PyTorch without this entry point: say so in the row
        return f"unknown ({type(exc).__name__})"


def decode_step_views(batch: int, ctx: int, dev: str = "cuda") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q / K / V of the decode step's first layer as its SDPA sees them (Q a view of the fused QKV output)."""
    from graphroof.frontends.torch.decoder_step import DIMS

    d, heads, kv = DIMS["llama-3-8b"]["d"], DIMS["llama-3-8b"]["heads"], DIMS["llama-3-8b"]["kv"]
    hd = d // heads
    qkv = torch.randn(batch, (heads + 2 * kv) * hd, device=dev, dtype=torch.bfloat16)
    q = qkv.split([heads * hd, kv * hd, kv * hd], dim=-1)[0].view(batch, heads, 1, hd)
    k = torch.randn(batch, kv, ctx, hd, device=dev, dtype=torch.bfloat16)
    return q, k, torch.randn_like(k)


def decode(t: Timer, out: Path) -> None:
    """The decode step's kernels by batch (module doc)."""
    from graphroof.frontends.torch.decoder_step import decoder_step

    rows, prof = [], []
    for b, ctx in DECODE:
        try:
            m, x = decoder_step(b, ctx, "llama-3-8b", device="cuda", init=True)
            with torch.no_grad():
                ts = t.graph(lambda m=m, x=x: m(*x), 1)
                ks = kernels_of(lambda m=m, x=x: m(*x))
        except Exception as exc:  # noqa: BLE001
            print(f"decode b={b} ctx={ctx}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
            continue
        backend = sdpa_backend(*decode_step_views(b, ctx))
        rows.append({"batch": b, "context": ctx, "time_s": ts, "kernel_sum_s": sum(k[2] for k in ks) / 1e6,
                     "sdpa_backend": backend})
        prof += [{"batch": b, "context": ctx, "kernel": n[:200], "calls": c, "device_us": us} for n, c, us in ks]
        print(f"decode b={b} ctx={ctx}: {ts * 1e3:.3f} ms, kernels {sum(k[2] for k in ks) / 1e3:.3f} ms, "
              f"SDPA {backend}", flush=True)
        write(out / "decode_step.csv", rows)
        write(out / "decode_step_kernels.csv", prof)
        m = x = None  # type: ignore[assignment]
        torch.cuda.empty_cache()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--parts", default="naive,stream,grouped,softmax,router,decode")
    a = ap.parse_args()
    t0 = time.perf_counter()
    out = gpu_run_dir(a.out)
    t = Timer("cuda", 7)
    parts = set(a.parts.split(","))
    for part, fn in (("naive", lambda: naive(out)), ("stream", lambda: stream(t, out)),
                     ("grouped", lambda: grouped(t, out)), ("softmax", lambda: softmax(t, out)),
                     ("router", lambda: router(t, out)), ("decode", lambda: decode(t, out))):
        if part in parts:
            fn()
            print(f"{part} part {time.perf_counter() - t0:.1f} s", flush=True)
    (out / "done.json").write_text(json.dumps({"wall_s": time.perf_counter() - t0}))


if __name__ == "__main__":
    main()
