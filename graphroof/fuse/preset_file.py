"""Read and validate one runtime preset file (TOML, read with :mod:`tomllib`; nothing in it is executed).

Schema (every table but ``name`` optional; absent keys keep :class:`~graphroof.fuse.runtimes.Runtime`'s
defaults, which are one kernel per op, launches added per kernel)::

    name = "tensorrt"                 # lower-case letters, digits, '-', '.'
    based_on = "tensorrt-llm"         # optional: start from that built-in preset's tables (one level, no chains);
                                      # this file's keys replace its keys, its name / aliases / engine do not carry
    aliases = ["trt"]
    engine = "NVIDIA TensorRT 8.x-10.x"
    description = "one line"

    [fusion]
    vector_chains = true              # norms (+ residual), activations, casts ... as one kernel per chain
    epilogues = true                  # bias / activation / residual add into the GEMM / conv
    horizontal_gemms = true           # QKV, gate+up as one GEMM
    gate_up = true                    # with horizontal_gemms: gate+up fused too (false: only QKV)
    fold_batch_norm = true            # inference BN folded into the conv weights
    attention_writes_layout = true    # fused MHA writes [tokens, hidden] itself
    layout_copies = false             # unfused attention: Q, K, V, O copied to / from batched-GEMM order (fuse.passes)
    reduction_passes = false          # one kernel per norm / softmax row statistic before it (fuse.passes)
    split_unfused_attention = false   # unfused attention: Q K^T, softmax, P V as three kernels (fuse.passes)

    [launch]
    decode = "kernel"                 # "kernel" | "step" (decode step as one CUDA graph)
    cuda_graphs = false               # default: decode == "step"
    overlap = true                    # host dispatch runs ahead of the device (two-stage pipeline)
    host_overhead_per_kernel_s = 0.0  # framework dispatch per kernel, on top of the profile's launch_overhead_s
    host_overhead_per_library_call_s = 0.0  # more host time per GEMM / conv / fused-attention library call
    aten_ops = false                  # ops run PyTorch's ATen CUDA implementations (graphroof.timing.host)
    request_overhead_s = 0.0          # runtime time per request before its first token (setup, sampling, syncs)
    host_per_sequence_s = 0.0         # host time per running sequence per step, overlapped: a step's floor
    call_overhead_s = 0.0             # host time per inference call before its first kernel (analyze, with overlap)

    [kernels]
    gqa_shared_kv = true
    allreduce = "nccl"                # nccl | custom | nvls
    weight_only_gemm = "fused_dequant"  # fused_dequant (per row) | tile_dequant (per M tile) | dequant_then_gemm
    fp8_gemm = false
    fp8_quantize_after_attention = false  # the fp8 GEMM input's quantize after an attention kernel: a kernel of its own
    attention_context_prep = false    # a prefill attention also runs offset + bias / rotary / KV-write kernels (timing.attention)
    moe_grouped_gemm = true           # true | false | "torch": PyTorch's torch._grouped_mm (one grouped kernel on
                                      # compute capability 9.x / 10.x, one GEMM per expert elsewhere: timing.moe) |
                                      # "triton": vLLM / SGLang's Triton fused_moe kernel (timing.moe)
    autocast = false                  # torch.autocast: a weight cast kernel before every GEMM / conv
    l2_activations = false            # kernels back to back: activations read from L2 when they fit (timing.l2)
    attention_kernel = "auto"         # auto | flash2 | flash3 | cudnn (graphroof.timing.attention)
    norm_stream = "norm"              # norm | elementwise: the stream rate a norm kernel runs at (graphroof.timing.stream)
    weight_only_group = 128           # weights per scale of 4-bit weight-only GEMMs (graphroof.timing.quantgemm)
    gemm_schedule = "auto"            # auto | waves | stream_k: the cuBLAS generation's tile schedule (timing.gemm)
    gemv_max_rows = 0                 # quantized GEMMs of at most this many rows per weight run as the runtime's
    gemv_float_max_rows = 0           # matrix-vector kernel (float ones: the second key; 0: none; llama.cpp: 8 and
                                      # 1), priced by graphroof.timing.gemm_plan.gemv_time_s at
    gemv_mem_bw_efficiency = 0.0      # its share of the bandwidth (0: the profile's gemm_mem_bw_efficiency) and
    gemv_sm_bw_bytes_per_s = 0.0      # one SM's rate: its bytes in flight per SM over the DRAM latency (0: none)
    gemv_quant_sm_bw_bytes_per_s = 0.0  # the same for its weight-only quantized mat-vec kernel (0: the one above)
    aten_strided_elements_per_sm_clock = 0.0  # PyTorch's non-vectorised elementwise kernels (a broadcast or cast
                                      # operand): elements per SM per clock, a bound beside bytes (timing.aten)
    aten_softmax_reg_elements_per_sm_clock = 0.0  # PyTorch's register softmax kernel (2,049-9,216 elements a row):
                                      # elements per SM per clock, a bound beside bytes (timing.aten)

    [sources]                         # capability -> citation (strings)
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import tomllib

from ..errors import InputError

__all__ = ["read_preset_fields", "preset_fields", "ALLREDUCE", "WEIGHT_ONLY_GEMM", "DECODE_LAUNCH",
           "ATTENTION_KERNELS", "NORM_STREAMS", "GEMM_SCHEDULES", "MOE_GROUPED_GEMM"]

ALLREDUCE = ("nccl", "custom", "nvls")
WEIGHT_ONLY_GEMM = ("fused_dequant", "tile_dequant", "dequant_then_gemm")
DECODE_LAUNCH = ("kernel", "step")
#: fused-attention kernel families (graphroof.timing.attention): auto = the device's native kernel
ATTENTION_KERNELS = ("auto", "flash2", "flash3", "cudnn")
#: the stream kind a norm kernel is priced as: ``norm`` (the profile's norm efficiency) | ``elementwise`` (one pass)
NORM_STREAMS = ("norm", "elementwise")
#: how the runtime's dense GEMM library schedules tiles (graphroof.timing.gemm.schedule_of): ``auto`` (the
#: profile's) | ``waves`` (one CTA per tile, whole waves) | ``stream_k`` (persistent stream-K, loads overlap the math)
GEMM_SCHEDULES = ("auto", "waves", "stream_k")
#: ``[kernels] moe_grouped_gemm``: true (one grouped GEMM over the experts) | false (one GEMM per visited expert) |
#: ``"torch"`` (PyTorch's ``torch._grouped_mm``: which of the two depends on the device, graphroof.timing.moe) |
#: ``"triton"`` (vLLM / SGLang's Triton fused_moe kernel: one grouped kernel, priced as family ``triton_moe``)
MOE_GROUPED_GEMM: tuple[bool | str, ...] = (True, False, "torch", "triton")

_MAX_BYTES = 256_000
_TOP = {"name", "based_on", "aliases", "engine", "description", "fusion", "launch", "kernels", "sources"}
#: where ``based_on`` names its preset (the built-in presets)
_BUILTIN_DIR = Path(__file__).with_name("presets")
_TABLES = ("fusion", "launch", "kernels", "sources")
#: table -> key -> (Runtime field, type, allowed values or None)
_FIELDS: dict[str, dict[str, tuple[str, type, tuple | None]]] = {
    "fusion": {"vector_chains": ("fuse_vector_chains", bool, None), "epilogues": ("fuse_epilogues", bool, None),
               "horizontal_gemms": ("fuse_horizontal_gemms", bool, None),
               "gate_up": ("fuse_gate_up", bool, None),
               "fold_batch_norm": ("fold_batch_norm", bool, None),
               "attention_writes_layout": ("attention_writes_layout", bool, None),
               "layout_copies": ("layout_copies", bool, None),
               "reduction_passes": ("reduction_passes", bool, None),
               "split_unfused_attention": ("split_unfused_attention", bool, None)},
    "launch": {"decode": ("decode_launch", str, DECODE_LAUNCH), "cuda_graphs": ("cuda_graphs", bool, None),
               "overlap": ("overlap_launch", bool, None),
               "host_overhead_per_kernel_s": ("host_overhead_per_kernel_s", float, None),
               "host_overhead_per_library_call_s": ("host_overhead_per_library_call_s", float, None),
               "aten_ops": ("aten_ops", bool, None),
               "request_overhead_s": ("request_overhead_s", float, None),
               "host_per_sequence_s": ("host_per_sequence_s", float, None),
               "call_overhead_s": ("call_overhead_s", float, None)},
    "kernels": {"gqa_shared_kv": ("gqa_shared_kv", bool, None), "allreduce": ("allreduce", str, ALLREDUCE),
                "weight_only_gemm": ("weight_only_gemm", str, WEIGHT_ONLY_GEMM),
                "fp8_gemm": ("fp8_gemm", bool, None), "moe_grouped_gemm": ("moe_grouped_gemm", object, MOE_GROUPED_GEMM),
                "fp8_quantize_after_attention": ("fp8_quantize_after_attention", bool, None),
                "attention_context_prep": ("attention_context_prep", bool, None),
                "autocast": ("autocast", bool, None), "l2_activations": ("l2_activations", bool, None),
                "attention_kernel": ("attention_kernel", str, ATTENTION_KERNELS),
                "norm_stream": ("norm_stream", str, NORM_STREAMS),
                "weight_only_group": ("weight_only_group_size", int, None),
                "gemm_schedule": ("gemm_schedule", str, GEMM_SCHEDULES),
                "vocab_parallel": ("vocab_parallel", bool, None),
                "gemv_sm_bw_bytes_per_s": ("gemv_sm_bw_bytes_per_s", float, None),
                "gemv_quant_sm_bw_bytes_per_s": ("gemv_quant_sm_bw_bytes_per_s", float, None),
                "gemv_mem_bw_efficiency": ("gemv_mem_bw_efficiency", float, None),
                "gemv_max_rows": ("gemv_max_rows", int, None),
                "gemv_float_max_rows": ("gemv_float_max_rows", int, None),
                "aten_strided_elements_per_sm_clock": ("aten_strided_elements_per_sm_clock", float, None),
                "aten_softmax_reg_elements_per_sm_clock": ("aten_softmax_reg_elements_per_sm_clock", float, None)},
}
_NAME = re.compile(r"^[a-z0-9][a-z0-9.\-]{0,47}$")


def _shown_value(v: Any) -> str:
    """A preset value as TOML spells it (``true``, ``"torch"``)."""
    return ("true" if v else "false") if isinstance(v, bool) else f'"{v}"'


def read_preset_fields(path: Path) -> dict[str, Any]:
    """The :class:`~graphroof.fuse.runtimes.Runtime` fields of the preset in *path* (a TOML file), validated; any
    problem is one :class:`InputError` naming the key."""
    shown = path.name
    try:
        if path.stat().st_size > _MAX_BYTES:
            raise InputError(f"runtime preset {shown}: larger than {_MAX_BYTES} bytes; a preset is a short TOML file")
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"runtime preset {shown}: cannot read it ({type(e).__name__}); pass a readable .toml "
                         "file") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"runtime preset {shown}: not valid TOML ({e}); fix the file") from None
    return preset_fields(data, source=shown, path=str(path))


def _on_base(data: dict[str, Any], shown: str) -> dict[str, Any]:
    """*data* over the tables of the built-in preset its ``based_on`` names (that preset's own keys first, this
    file's replacing them); the base may not itself be based on another."""
    base = data["based_on"]
    f = _BUILTIN_DIR / f"{base}.toml" if isinstance(base, str) and _NAME.match(base) else None
    if f is None or not f.is_file():
        names = ", ".join(sorted(p.stem for p in _BUILTIN_DIR.glob("*.toml")))
        raise InputError(f"runtime preset {shown}: based_on = {base!r} is not a built-in preset; use one of {names}")
    parent = tomllib.loads(f.read_text(encoding="utf-8"))
    if "based_on" in parent:
        raise InputError(f"runtime preset {shown}: based_on = {base!r} is itself based on another preset; name "
                         f"{parent['based_on']!r} instead")
    out = {k: v for k, v in data.items() if k != "based_on"}
    for t in _TABLES:
        mine = data.get(t, {})
        if not isinstance(mine, dict):
            raise InputError(f"runtime preset {shown}: [{t}] must be a table")
        out[t] = {**parent.get(t, {}), **mine}
    return out


def preset_fields(data: dict[str, Any], *, source: str = "preset", path: str = "") -> dict[str, Any]:
    """The :class:`~graphroof.fuse.runtimes.Runtime` fields of a parsed preset table (see the module docstring)."""
    def bad(msg: str) -> InputError:
        return InputError(f"runtime preset {source}: {msg}")

    unknown = sorted(set(data) - _TOP)
    if unknown:
        raise bad(f"unknown key {unknown[0]!r}; a preset has {', '.join(sorted(_TOP))}")
    if "based_on" in data:
        data = _on_base(data, source)
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise bad("'name' must be a lower-case name (letters, digits, '-', '.'), e.g. name = \"my-engine\"")
    aliases = data.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and _NAME.match(a) for a in aliases):
        raise bad("'aliases' must be a list of lower-case names")
    kw: dict[str, Any] = {"name": name, "aliases": tuple(aliases), "path": path}
    for key in ("engine", "description"):
        v = data.get(key, "")
        if not isinstance(v, str):
            raise bad(f"{key!r} must be a string")
        kw[key] = v
    kw["description"] = kw["description"] or kw["engine"] or name
    for table, fields in _FIELDS.items():
        t = data.get(table, {})
        if not isinstance(t, dict):
            raise bad(f"[{table}] must be a table")
        for k, v in t.items():
            if k not in fields:
                raise bad(f"unknown key [{table}].{k}; use one of {', '.join(fields)}")
            attr, typ, allowed = fields[k]
            if typ is object and not any(type(v) is type(a) and v == a for a in allowed or ()):
                raise bad(f"[{table}].{k} must be one of {', '.join(_shown_value(a) for a in allowed or ())}, got {v!r}")
            if typ is bool and not isinstance(v, bool):
                raise bad(f"[{table}].{k} must be true or false, got {v!r}")
            if typ is float and k.endswith("_bytes_per_s"):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= 1e14:
                    raise bad(f"[{table}].{k} must be a rate in bytes per second in [0, 1e14], got {v!r}")
                v = float(v)
            elif typ is float and k.endswith("_per_sm_clock"):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= 64:
                    raise bad(f"[{table}].{k} must be a number of elements per SM per clock in [0, 64], got {v!r}")
                v = float(v)
            elif typ is float:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or v > 1:
                    what = "a share" if k.endswith("_efficiency") else "a number of seconds"
                    raise bad(f"[{table}].{k} must be {what} in [0, 1], got {v!r}")
                v = float(v)
            low = 0 if k.startswith("gemv_") else 1  # a mat-vec row limit of 0: no such kernel
            if typ is int and (isinstance(v, bool) or not isinstance(v, int) or not low <= v <= 65536):
                raise bad(f"[{table}].{k} must be a whole number in [{low}, 65536], got {v!r}")
            if typ is str and (not isinstance(v, str) or (allowed and v not in allowed)):
                raise bad(f"[{table}].{k} must be one of {', '.join(allowed or ())}, got {v!r}")
            kw[attr] = v
    sources = data.get("sources", {})
    if not isinstance(sources, dict) or not all(isinstance(v, str) for v in sources.values()):
        raise bad("[sources] must map each capability to a citation string")
    kw["sources"] = dict(sources)
    return kw
