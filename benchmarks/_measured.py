"""Shared by validate_measured.py and fit_kernel_model.py: read the Vidur profiling data and build each measured
kernel's shape from the model columns (plain numbers; graphroof.timing prices them).

Data: ``../shared/data/measured/`` (Vidur profiling data, microsoft/vidur, MIT licence; see its README.md).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

FP16 = 2  # bytes per element: every measured kernel is fp16
ID_BYTES = 8  # int64 token ids / positions

#: measured column -> kernel class
OPS_COLUMNS = {
    "input_layernorm_ms": "norm", "post_attention_layernorm_ms": "norm", "attn_pre_proj_ms": "gemm_qkv",
    "attn_rope_ms": "rope", "attn_post_proj_ms": "gemm_o", "mlp_up_proj_ms": "gemm_up", "mlp_act_ms": "act",
    "mlp_down_proj_ms": "gemm_down", "add_ms": "add", "emb_ms": "embedding",
}
#: one decoder layer: column -> how many times it runs (the embedding is per model, not per layer)
LAYER = {"input_layernorm_ms": 1, "attn_pre_proj_ms": 1, "attn_rope_ms": 1, "attn_post_proj_ms": 1,
         "post_attention_layernorm_ms": 1, "mlp_up_proj_ms": 1, "mlp_act_ms": 1, "mlp_down_proj_ms": 1,
         "add_ms": 2}
GPU_PROFILE = {"a100": "a100-80gb-sxm", "h100": "h100-sxm"}


def data_dir() -> Path:
    env = os.environ.get("GRAPHROOF_MEASURED_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent.parent
    for cand in (here.parent / "shared" / "data" / "measured", here / ".." / "shared" / "data" / "measured"):
        if cand.is_dir():
            return cand
    return here.parent / "shared" / "data" / "measured"


@dataclass(frozen=True)
class Kernel:
    """A measured kernel's shape: a GEMM (m, n, k) or a streaming kernel (bytes, kind)."""

    column: str
    cls: str
    gemm: tuple[int, int, int] | None = None
    stream_bytes: float = 0.0
    stream_kind: str = ""


@dataclass(frozen=True)
class OpsRow:
    gpu: str
    model: str
    tokens: int
    tp: int
    kernels: dict[str, Kernel]
    measured_s: dict[str, float]


def kernels_of(h: int, heads: int, kv_heads: int, ffn: int, tokens: int, tp: int) -> dict[str, Kernel]:
    """The shapes of one layer's non-attention kernels (per-GPU shard at tensor parallelism *tp*)."""
    t = tokens
    d = h // heads
    qkv_n = (heads + 2 * kv_heads) * d // tp
    q_k = (heads + kv_heads) * d // tp  # rotated channels per token (q and k)
    norm_b = 2 * t * h * FP16 + h * FP16  # read x, write y, read gamma
    return {
        "input_layernorm_ms": Kernel("input_layernorm_ms", "norm", stream_bytes=norm_b, stream_kind="norm"),
        "post_attention_layernorm_ms": Kernel("post_attention_layernorm_ms", "norm", stream_bytes=norm_b,
                                              stream_kind="norm"),
        "attn_pre_proj_ms": Kernel("attn_pre_proj_ms", "gemm_qkv", gemm=(t, qkv_n, h)),
        # rotary in place on q and k: read + write each, read the positions and one cos/sin row per token
        "attn_rope_ms": Kernel("attn_rope_ms", "rope", stream_bytes=2 * t * q_k * FP16 + t * d * FP16 + t * ID_BYTES,
                               stream_kind="rotary"),
        "attn_post_proj_ms": Kernel("attn_post_proj_ms", "gemm_o", gemm=(t, h, heads * d // tp)),
        "mlp_up_proj_ms": Kernel("mlp_up_proj_ms", "gemm_up", gemm=(t, 2 * ffn // tp, h)),
        # SiLU(gate) * up: read gate and up, write the product
        "mlp_act_ms": Kernel("mlp_act_ms", "act", stream_bytes=3 * t * (ffn // tp) * FP16, stream_kind="act_mul"),
        "mlp_down_proj_ms": Kernel("mlp_down_proj_ms", "gemm_down", gemm=(t, h, ffn // tp)),
        "add_ms": Kernel("add_ms", "add", stream_bytes=3 * t * h * FP16, stream_kind="elementwise"),
        # embedding gather: read the ids and one row per token, write the rows
        "emb_ms": Kernel("emb_ms", "embedding", stream_bytes=2 * t * h * FP16 + t * ID_BYTES, stream_kind="gather"),
    }


def load_ops(directory: Path | None = None) -> list[OpsRow]:
    directory = directory or data_dir()
    rows = []
    for path in sorted(directory.glob("vidur_*_Llama-2-*_ops.csv")):
        gpu, model = path.stem.split("_")[1], path.stem.split("_")[2]
        model = model.removeprefix("Llama-2-").removesuffix("-hf")
        with path.open(newline="") as f:
            for r in csv.DictReader(f):
                if r.get("use_gated_mlp", "True") != "True":
                    continue
                ks = kernels_of(int(r["n_embd"]), int(r["n_head"]), int(r["n_kv_head"]), int(r["n_expanded_embd"]),
                                int(r["num_tokens"]), int(r["num_tensor_parallel_workers"]))
                meas = {c: float(r[c]) * 1e-3 for c in OPS_COLUMNS if r.get(c) not in (None, "")}
                rows.append(OpsRow(gpu, model, int(r["num_tokens"]), int(r["num_tensor_parallel_workers"]), ks, meas))
    return rows


@dataclass(frozen=True)
class AllReduceRow:
    gpu: str
    n_gpus: int
    gpus_per_node: int
    size_bytes: int
    measured_s: float


def load_allreduce(directory: Path | None = None) -> list[AllReduceRow]:
    directory = directory or data_dir()
    rows = []
    for path in sorted(directory.glob("vidur_*_dgx_all_reduce.csv")):
        gpu = path.stem.split("_")[1]
        with path.open(newline="") as f:
            for r in csv.DictReader(f):
                rows.append(AllReduceRow(gpu, int(r["num_workers"]), int(r["devices_per_node"]), int(r["size_bytes"]),
                                         float(r["all_reduce_ms"]) * 1e-3))
    return rows
