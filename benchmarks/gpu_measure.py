"""Measure kernel and model times on a real GPU, for checking graphroof's predictions (run on a lent GPU).

    python benchmarks/gpu_measure.py --out DIR [--budget-s 360] [--quick]

Writes one CSV per section into DIR (rows appended as they are measured, so a run cut short keeps what it
measured) and prints a short summary.  Sections:

* ``copy``      device-to-device copy bandwidth (bytes read + written) by size;
* ``gemm``      ``x[M, K] @ w[K, N]`` in bf16 and fp8 (``torch._scaled_mm``, per-tensor scales, bf16 out) for the
                per-layer GEMMs of several Llama-shaped models, M = tokens in the batch; weights rotate over
                enough copies to exceed the L2 cache, as consecutive layers do in a real model;
* ``int4``      weight-only int4 (``torch._weight_int4pack_mm``, the tinygemm kernel gpt-fast uses), group 128;
* ``pointwise`` the memory-bound kernels of a decoder layer (RMSNorm, SiLU-and-mul, residual add) by tokens;
* ``attn``      ``scaled_dot_product_attention`` prefill (causal, GQA) by length and head dim, and one-token decode
                attention over a KV cache by batch and context;
* ``model``     a transformers ``LlamaForCausalLM`` with Llama-3-8B shapes (random bf16 weights, sdpa attention,
                eager PyTorch): prefill latency and decode-step latency by batch and context, wall clock and the
                GPU kernel time the profiler sums (the difference is host overhead).

Every time is the median of several repetitions after warm-up, read with CUDA events (kernels) or a synchronised
host clock (whole steps).  The numbers are the card's as found: clocks and power limits are not touched.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import subprocess
import sys
import time

import torch

DEADLINE = [math.inf]
#: appended to every CSV name (``--sdpa-backend flash`` -> ``measure_vision_sdpa-flash.csv``)
SUFFIX = [""]


def left_s() -> float:
    return DEADLINE[0] - time.monotonic()


class Sink:
    """Appends rows to ``DIR/measure_<section>.csv`` (header from the first row's keys)."""

    def __init__(self, out: str, section: str) -> None:
        self.path = os.path.join(out, f"measure_{section}{SUFFIX[0]}.csv")
        self.f = open(self.path, "w", newline="")  # noqa: SIM115 - closed in close()
        self.w: csv.DictWriter | None = None
        self.n = 0

    def row(self, **kw) -> None:
        if self.w is None:
            self.w = csv.DictWriter(self.f, fieldnames=list(kw))
            self.w.writeheader()
        self.w.writerow(kw)
        self.f.flush()
        self.n += 1

    def close(self) -> None:
        self.f.close()


def graph_time_ms(fn, calls: int, reps: int = 5) -> float:
    """Median time of one ``fn()`` call: *calls* calls captured in a CUDA graph, replayed *reps* times (launch gaps
    removed, as under CUDA graphs in a serving engine)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / calls)
    del g
    return statistics.median(times)


def event_time_ms(fn, reps: int = 10, warm: int = 3) -> float:
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def wall_ms(fn, reps: int) -> float:
    """Median wall time of ``fn()`` with a synchronize (host overhead included), after one warm-up call."""
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def llama3_8b(layers: int = 32):
    """transformers' LlamaForCausalLM with Llama-3-8B shapes, random bf16 weights built on the GPU, sdpa."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=layers, num_attention_heads=32,
                      num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            return LlamaForCausalLM(cfg).eval(), cfg
    finally:
        torch.set_default_dtype(torch.float32)


# -- sections -------------------------------------------------------------------------------------------------

def sec_copy(out: str, quick: bool) -> None:
    sink = Sink(out, "copy")
    for mb in (1, 8, 64, 512, 2048):
        n = mb * 1_000_000 // 2
        src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        dst = torch.empty_like(src)
        ms = graph_time_ms(lambda src=src, dst=dst: dst.copy_(src), calls=10)
        sink.row(bytes_each_way=n * 2, time_ms=f"{ms:.5f}", gb_per_s=f"{2 * n * 2 / ms / 1e6:.0f}")
    sink.close()


#: model -> (hidden, q heads, kv heads, head_dim, ffn, vocab); the per-layer GEMMs follow (fused QKV, o, gate+up, down)
MODELS = {
    "llama-3-8b": (4096, 32, 8, 128, 14336, 128256),
    "llama-2-13b": (5120, 40, 40, 128, 13824, 32000),
    "qwen2.5-7b": (3584, 28, 4, 128, 18944, 152064),
    "llama-3-70b-tp8": (8192, 64, 8, 128, 28672, 128256),  # one of 8 tensor-parallel shards
    "phi-3-mini": (3072, 32, 32, 96, 8192, 32064),
}


def gemm_shapes(quick: bool) -> list[tuple[str, str, int, int]]:
    out = []
    for model, (h, nh, kv, hd, ffn, vocab) in MODELS.items():
        tp = 8 if model.endswith("tp8") else 1
        out += [(model, "qkv", h, (nh + 2 * kv) * hd // tp), (model, "o", nh * hd // tp, h),
                (model, "gate_up", h, 2 * ffn // tp), (model, "down", ffn // tp, h)]
        if model == "llama-3-8b":
            out.append((model, "lm_head", h, vocab))
        if quick:
            break
    return out


TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


def _copies(weight_bytes: int) -> int:
    return max(2, min(16, math.ceil(256e6 / weight_bytes)))


def sec_gemm(out: str, quick: bool) -> None:
    sink = Sink(out, "gemm")
    fp8 = hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm")
    tokens = TOKENS[::3] if quick else TOKENS
    for model, name, k, n in gemm_shapes(quick):
        for dtype in ("bf16", "fp8") if fp8 else ("bf16",):
            if left_s() < 60:
                return
            wbytes = k * n * (2 if dtype == "bf16" else 1)
            c = _copies(wbytes)
            try:
                if dtype == "bf16":
                    ws = [torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / math.sqrt(k) for _ in range(c)]
                else:  # cuBLASLt fp8 wants the second operand column-major: store [N, K] and transpose
                    ws = [(torch.randn(n, k, device="cuda") / math.sqrt(k)).to(torch.float8_e4m3fn).t()
                          for _ in range(c)]
                one = torch.ones((), device="cuda")
                for m in tokens:
                    xs = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                    if dtype == "fp8":
                        xq = xs.to(torch.float8_e4m3fn)

                        def fn(ws=ws, xq=xq):
                            for w in ws:
                                torch._scaled_mm(xq, w, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
                    else:
                        def fn(ws=ws, xs=xs):
                            for w in ws:
                                torch.matmul(xs, w)
                    try:
                        ms = graph_time_ms(fn, calls=max(1, 24 // c)) / c
                    except Exception as e:  # noqa: BLE001 - e.g. an fp8 shape cuBLASLt refuses
                        sink.row(model=model, gemm=name, dtype=dtype, M=m, N=n, K=k, time_ms="", tflops="",
                                 gb_per_s="", note=f"{type(e).__name__}: {str(e)[:80]}")
                        continue
                    flops = 2 * m * n * k
                    byts = wbytes + m * k * (2 if dtype == "bf16" else 1) + m * n * 2
                    sink.row(model=model, gemm=name, dtype=dtype, M=m, N=n, K=k, time_ms=f"{ms:.5f}",
                             tflops=f"{flops / ms / 1e9:.1f}", gb_per_s=f"{byts / ms / 1e6:.0f}", note="")
                del ws
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
    sink.close()


def sec_int4(out: str, quick: bool) -> None:
    sink = Sink(out, "int4")
    group = 128
    for model, name, k, n in gemm_shapes(True):
        if left_s() < 45:
            break
        try:
            c = _copies(k * n // 2)
            packed = []
            for _ in range(c):
                q = torch.randint(0, 16, (n, k), dtype=torch.int32, device="cuda")
                q8 = (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)
                packed.append(torch._convert_weight_to_int4pack(q8, 8))
            sz = torch.randn(k // group, n, 2, device="cuda", dtype=torch.bfloat16)
            for m in (1, 2, 4, 8, 16, 32, 64, 128, 256):
                x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)

                def fn(x=x, packed=packed):
                    for p in packed:
                        torch._weight_int4pack_mm(x, p, group, sz)
                ms = graph_time_ms(fn, calls=max(1, 24 // c)) / c
                sink.row(model=model, gemm=name, M=m, N=n, K=k, group=group, time_ms=f"{ms:.5f}",
                         weight_gb_per_s=f"{k * n / 2 / ms / 1e6:.0f}", note="")
        except Exception as e:  # noqa: BLE001 - an API this torch lacks: say so
            sink.row(model=model, gemm=name, M="", N=n, K=k, group=group, time_ms="", weight_gb_per_s="",
                     note=f"{type(e).__name__}: {str(e)[:120]}")
    sink.close()


def sec_pointwise(out: str, quick: bool) -> None:
    sink = Sink(out, "pointwise")
    h, ffn = 4096, 14336
    w = torch.randn(h, device="cuda", dtype=torch.bfloat16)
    for m in TOKENS[::2] if quick else TOKENS:
        x = torch.randn(m, h, device="cuda", dtype=torch.bfloat16)
        r = torch.randn(m, h, device="cuda", dtype=torch.bfloat16)
        gu = torch.randn(m, 2 * ffn, device="cuda", dtype=torch.bfloat16)
        cases = {
            "rms_norm(F.rms_norm)": (lambda: torch.nn.functional.rms_norm(x, (h,), w, 1e-5), 2 * m * h * 2),
            "silu_and_mul(eager: 2 kernels)": (lambda: torch.nn.functional.silu(gu[:, :ffn]) * gu[:, ffn:],
                                                None),
            "residual_add": (lambda: x + r, 3 * m * h * 2),
        }
        for name, (fn, byts) in cases.items():
            ms = graph_time_ms(fn, calls=20)
            sink.row(kernel=name, tokens=m, hidden=h, ffn=ffn, time_ms=f"{ms:.5f}",
                     min_bytes=byts if byts else 3 * m * ffn * 2)
    sink.close()


def sec_attn(out: str, quick: bool) -> None:
    import torch.nn.functional as F

    sink = Sink(out, "attn")
    for hd in (128, 64):
        nh, kv = (32, 8) if hd == 128 else (32, 32)
        for s in (512, 1024, 2048, 4096, 8192) if quick else (512, 1024, 2048, 4096, 8192, 16384):
            if left_s() < 40:
                return
            q = torch.randn(1, nh, s, hd, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(1, kv, s, hd, device="cuda", dtype=torch.bfloat16)
            v = torch.randn_like(k)
            ms = graph_time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                      enable_gqa=nh != kv), calls=5)
            flops = 4 * nh * hd * s * (s + 1) / 2  # QK^T and PV over the causal half (incl. diagonal)
            sink.row(phase="prefill", batch=1, heads=nh, kv_heads=kv, head_dim=hd, q_len=s, context=s,
                     time_ms=f"{ms:.5f}", tflops=f"{flops / ms / 1e9:.1f}", kv_gb_per_s="")
    nh, kv, hd = 32, 8, 128
    for b in (1, 8, 32, 64):
        for ctx in (512, 2048, 8192):
            if left_s() < 40 or b * ctx > 64 * 8192:
                continue
            q = torch.randn(b, nh, 1, hd, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(b, kv, ctx, hd, device="cuda", dtype=torch.bfloat16)
            v = torch.randn_like(k)
            ms = graph_time_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), calls=10)
            kvb = 2 * b * kv * ctx * hd * 2
            sink.row(phase="decode", batch=b, heads=nh, kv_heads=kv, head_dim=hd, q_len=1, context=ctx,
                     time_ms=f"{ms:.5f}", tflops="", kv_gb_per_s=f"{kvb / ms / 1e6:.0f}")
    sink.close()


def sec_model(out: str, quick: bool) -> None:
    from transformers.cache_utils import DynamicCache

    sink = Sink(out, "model")
    layers = 8 if quick else 32
    model, cfg = llama3_8b(layers)
    params = sum(p.numel() for p in model.parameters())

    def gpu_ms(fn) -> float:
        from torch.profiler import ProfilerActivity, profile

        fn()
        torch.cuda.synchronize()
        try:
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
            return sum(e.time_range.elapsed_us() for e in prof.events() if e.device_type.name == "CUDA") / 1e3
        except Exception:  # noqa: BLE001 - a profiler API this torch lacks: no GPU-time column
            return float("nan")

    with torch.inference_mode():
        for b, p in ((1, 128), (1, 512), (1, 1024), (1, 2048), (1, 4096), (4, 1024), (8, 1024), (16, 512)):
            if left_s() < 30:
                break
            ids = torch.randint(0, 32000, (b, p), device="cuda")
            fn = lambda ids=ids: model(input_ids=ids, use_cache=True, logits_to_keep=1)  # noqa: E731
            w = wall_ms(fn, 5)
            g = gpu_ms(fn)
            sink.row(phase="prefill", layers=layers, params=params, batch=b, prompt=p, context=0, wall_ms=f"{w:.3f}",
                     gpu_kernel_ms=f"{g:.3f}")
        for b in (1, 8, 32, 64):
            for ctx in (512, 2048):
                if left_s() < 25:
                    break
                ids = torch.randint(0, 32000, (b, ctx), device="cuda")
                cache = DynamicCache(config=cfg)
                model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
                nxt = torch.randint(0, 32000, (b, 1), device="cuda")

                def step(cache=cache, nxt=nxt, ctx=ctx):
                    model(input_ids=nxt, past_key_values=cache, use_cache=True)
                    cache.crop(-1)  # back to the same context for the next repetition
                w = wall_ms(step, 10)
                g = gpu_ms(step)
                sink.row(phase="decode", layers=layers, params=params, batch=b, prompt=1, context=ctx,
                         wall_ms=f"{w:.3f}", gpu_kernel_ms=f"{g:.3f}")
                del cache
                torch.cuda.empty_cache()
    sink.close()


def _wall_and_graph_ms(fn, reps: int = 10) -> tuple[float, float]:
    """Eager wall time of ``fn()`` (synchronised host clock, median) and its time replayed as one CUDA graph
    (the same kernels without host overhead); NaN when the forward cannot be captured."""
    w = wall_ms(fn, reps)
    try:
        g_ms = graph_time_ms(fn, calls=1, reps=reps)
    except Exception:  # noqa: BLE001 - a forward a graph cannot capture
        torch.cuda.synchronize()
        g_ms = float("nan")
    return w, g_ms


def sec_vision(out: str, quick: bool) -> None:
    """torchvision ResNet-50 (fp16, channels-last) and a BERT-base encoder (fp16, sdpa) from transformers, random
    weights, eager PyTorch: wall per batch, and the same forward replayed as a CUDA graph."""
    sink = Sink(out, "vision")
    with torch.inference_mode():
        try:
            import torchvision

            net = torchvision.models.resnet50().cuda().half().eval().to(memory_format=torch.channels_last)
            for b in (1, 8, 32, 128, 256):
                if left_s() < 30:
                    break
                x = torch.randn(b, 3, 224, 224, device="cuda", dtype=torch.float16).to(
                    memory_format=torch.channels_last)
                w, g = _wall_and_graph_ms(lambda net=net, x=x: net(x))
                sink.row(model="resnet-50", framework="pytorch eager fp16 channels_last", batch=b, seq_or_image=224,
                         wall_ms=f"{w:.3f}", graph_ms=f"{g:.3f}", items_per_s_wall=f"{b / w * 1e3:.0f}")
            del net
        except Exception as e:  # noqa: BLE001
            sink.row(model="resnet-50", framework="", batch="", seq_or_image="", wall_ms="", graph_ms="",
                     items_per_s_wall=f"{type(e).__name__}: {str(e)[:100]}")
        try:
            from transformers import BertConfig, BertModel

            cfg = BertConfig()
            cfg._attn_implementation = "sdpa"
            torch.set_default_dtype(torch.float16)
            try:
                with torch.device("cuda"):
                    bert = BertModel(cfg).eval()
            finally:
                torch.set_default_dtype(torch.float32)
            for seq in (128, 384):
                for b in (1, 8, 32, 128):
                    if left_s() < 25:
                        break
                    ids = torch.randint(0, 30000, (b, seq), device="cuda")
                    w, g = _wall_and_graph_ms(lambda bert=bert, ids=ids: bert(input_ids=ids))
                    sink.row(model="bert-base", framework="pytorch eager fp16 sdpa", batch=b, seq_or_image=seq,
                             wall_ms=f"{w:.3f}", graph_ms=f"{g:.3f}", items_per_s_wall=f"{b / w * 1e3:.0f}")
        except Exception as e:  # noqa: BLE001
            sink.row(model="bert-base", framework="", batch="", seq_or_image="", wall_ms="", graph_ms="",
                     items_per_s_wall=f"{type(e).__name__}: {str(e)[:100]}")
    sink.close()


def sec_decode_graph(out: str, quick: bool) -> None:
    """Llama-3-8B shapes (transformers, random bf16 weights) decoding one step under a CUDA graph, as serving
    engines and gpt-fast run decode: the step at a fixed context (the cache is cropped back after each step, so
    every replay is the same step), by batch and context, beside the same step's eager wall time."""
    from transformers.cache_utils import DynamicCache

    sink = Sink(out, "decode_graph")
    model, cfg = llama3_8b()
    with torch.inference_mode():
        for b in (1, 8, 32, 64):
            for ctx in (512, 2048):
                if left_s() < 20:
                    break
                try:
                    cache = DynamicCache(config=cfg)
                    ids = torch.randint(0, 32000, (b, ctx), device="cuda")
                    model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
                    held = [(la.keys, la.values) for la in cache.layers]  # the prefill's K / V stay allocated
                    nxt = torch.randint(0, 32000, (b, 1), device="cuda")

                    def step(nxt=nxt, cache=cache, ctx=ctx):
                        model(input_ids=nxt, past_key_values=cache, use_cache=True)
                        cache.crop(-1)
                    w, g = _wall_and_graph_ms(step)
                    sink.row(batch=b, context=ctx, eager_wall_ms=f"{w:.3f}", graph_ms=f"{g:.3f}", note="")
                    del cache, held
                except Exception as e:  # noqa: BLE001
                    sink.row(batch=b, context=ctx, eager_wall_ms="", graph_ms="",
                             note=f"{type(e).__name__}: {str(e)[:100]}")
                torch.cuda.empty_cache()
    sink.close()


SECTIONS = {"copy": sec_copy, "gemm": sec_gemm, "int4": sec_int4, "pointwise": sec_pointwise, "attn": sec_attn,
            "model": sec_model, "vision": sec_vision, "decode_graph": sec_decode_graph}


def _sdpa(backend: str):
    import contextlib

    if backend == "default":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    SUFFIX[0] = f"_sdpa-{backend}"
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=360)
    ap.add_argument("--quick", action="store_true", help="fewer shapes (a smoke run)")
    ap.add_argument("--only", default=",".join(SECTIONS))
    ap.add_argument("--sdpa-backend", choices=("default", "flash"), default="default",
                    help="flash: every section runs with scaled_dot_product_attention restricted to the flash and "
                    "memory-efficient kernels (the default lets a CUDA-graph capture fall back to the math kernel)")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_measure: no CUDA device here; run it on a GPU machine")
    DEADLINE[0] = time.monotonic() + a.budget_s
    os.makedirs(a.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = True
    p = torch.cuda.get_device_properties(0)
    info = (f"device {p.name}, {p.multi_processor_count} SMs, {p.total_memory / 1e9:.1f} GB; torch {torch.__version__}, "
            f"cuda {torch.version.cuda}")
    try:
        import transformers

        info += f", transformers {transformers.__version__}"
    except ImportError:
        pass
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit,driver_version",
                          "--format=csv"], capture_output=True, text=True).stdout
    with open(os.path.join(a.out, "measure_env.txt"), "w") as f:
        f.write(info + "\n" + smi)
    print(info, flush=True)
    for name in a.only.split(","):
        if left_s() < 20:
            print(f"{name}: skipped (budget)", flush=True)
            continue
        t0 = time.monotonic()
        try:
            with _sdpa(a.sdpa_backend):
                SECTIONS[name](a.out, a.quick)
            print(f"{name}: done in {time.monotonic() - t0:.1f} s", flush=True)
        except Exception as e:  # noqa: BLE001 - keep the other sections
            print(f"{name}: failed after {time.monotonic() - t0:.1f} s: {type(e).__name__}: {e}"[:300], flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
