"""Runtime presets: the engine a model runs under, as data: which ops it fuses into one kernel, which kernels it
has (decode attention sharing K/V across a GQA group, all-reduce, weight-only / fp8 GEMMs, MoE grouped GEMM) and
how its host pays for launches.

Each preset is a TOML file in ``graphroof/fuse/presets/`` (read with :mod:`tomllib`, never executed; schema in
:mod:`graphroof.fuse.preset_file`) with a ``[sources]`` table citing where each capability claim comes from; a
user's own TOML file is accepted wherever a preset name is (``--runtime my-engine.toml``) and validated alike.
``graphroof runtimes`` lists them.

The fields (:class:`Runtime`):

* *fuse_vector_chains*: connected elementwise, reduction and norm ops (and the casts, gathers and copies between
  them) become one kernel, as long as the kernel graph stays acyclic (LayerNorm + residual, RMSNorm + residual,
  rotary, SiLU-and-mul);
* *fuse_epilogues*: a chain made only of pointwise ops (bias, activation, residual add, cast) whose first op
  reads a GEMM / conv output joins that GEMM's kernel (bias + GELU epilogues); a chain with a reduction stays
  its own kernel;
* *fuse_horizontal_gemms*: GEMMs that read the same activation tensor with no path between them (Q, K and V;
  gate and up) run as one GEMM over the concatenated weights;
* *fuse_gate_up*: with ``fuse_horizontal_gemms``, whether GEMMs that do not feed an attention op (a gated MLP's
  gate and up projections) fuse too; False keeps them two GEMMs while Q, K and V stay one (TensorRT-LLM 0.5 / 0.6
  Llama engines built without ``--use_fused_mlp``);
* *fold_batch_norm*: an inference batch-norm right after a conv is folded into the conv's weights (no kernel);
* *attention_writes_layout*: the copy that puts attention's output back into [tokens, hidden] order is done by
  the attention kernel itself (fused multi-head attention kernels);
* *layout_copies*, *reduction_passes*: kernels a compiler adds around the fused ones (:mod:`graphroof.fuse.passes`):
  an unfused attention's layout copies, a norm's or softmax's statistics passes; *split_unfused_attention*: an
  unfused attention's batched GEMMs and softmax as three kernels (the same module);
* *decode_launch*: ``kernel`` (every kernel launched) or ``step`` (a decode step replayed as one CUDA graph);
* *overlap_launch* and *host_overhead_per_kernel_s*: with ``overlap_launch`` the host dispatches kernels
  asynchronously ahead of the device, a two-stage pipeline (:func:`graphroof.timing.stream.host_pipeline`): the
  host spends the profile's ``launch_overhead_s`` plus the preset's ``host_overhead_per_kernel_s`` (Python and
  framework dispatch) per kernel, plus ``host_overhead_per_library_call_s`` per GEMM / conv / fused-attention
  library call (:mod:`graphroof.timing.host`; ``aten_ops``: an op that PyTorch runs as several kernels is that many
  launches), the device runs the kernels, and a step takes about max(host, device).
  Without it (the default) every kernel adds its launch to the device time, as graphroof always did;
* *allreduce*, *cuda_graphs*, *gqa_shared_kv*, *weight_only_gemm*, *fp8_gemm*, *fp8_quantize_after_attention*,
  *attention_context_prep*, *moe_grouped_gemm*, *attention_kernel*, *norm_stream*: kernel capabilities read by the kernel-time model (:mod:`graphroof.timing`);
* *autocast*: ``torch.autocast`` mixed precision in an eager framework: each GEMM / conv of the fp16 graph also
  runs the cast of its fp32 weight (priced in :func:`graphroof.roofline.evaluate`).

Views and reshapes are free everywhere; attention ops are one kernel each (flash / fused MHA); collectives and
ops without a counting rule are never fused.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from .preset_file import ALLREDUCE, DECODE_LAUNCH, WEIGHT_ONLY_GEMM, read_preset_fields

__all__ = ["Runtime", "RUNTIMES", "get_runtime", "read_preset", "runtime_names", "ALLREDUCE", "WEIGHT_ONLY_GEMM",
           "DECODE_LAUNCH", "PRESET_DIR"]

PRESET_DIR = Path(__file__).with_name("presets")


@dataclass(frozen=True)
class Runtime:
    """A fusion + kernel + launch policy (see the module docstring for what each field means)."""

    name: str
    description: str
    fuse_vector_chains: bool = False
    fuse_epilogues: bool = False
    fuse_horizontal_gemms: bool = False
    #: horizontal fusion also of GEMMs that feed no attention op (gate + up); False: only Q, K, V fuse
    fuse_gate_up: bool = True
    fold_batch_norm: bool = False
    #: a copy with no FLOPs right after attention (transpose + contiguous back to [tokens, hidden]) is the
    #: attention kernel's output layout, not a kernel of its own (serving attention kernels write it directly).
    attention_writes_layout: bool = False
    #: an unfused attention's Q, K, V are copied into batched-GEMM order and its output back, a kernel each
    #: (XLA's layout for cuBLAS batched dots; graphroof.fuse.passes)
    layout_copies: bool = False
    #: a norm / softmax runs one kernel per dependent row statistic before the one that normalises (a reduction
    #: is only a fused kernel's root in XLA; graphroof.fuse.passes)
    reduction_passes: bool = False
    #: an attention that writes its score matrix (not one fused kernel) runs as three kernels: the batched GEMM
    #: ``Q K^T``, the softmax, the batched GEMM ``P V`` (TensorRT's unfused MHA runner; graphroof.fuse.passes)
    split_unfused_attention: bool = False
    #: ``"kernel"``: every kernel pays the profile's launch overhead; ``"step"``: the whole step is replayed as
    #: one CUDA graph and pays the profile's per-step graph-launch cost once (decode in serving engines).
    decode_launch: str = "kernel"
    #: CPU time to dispatch one kernel (Python + framework dispatch) in eager frameworks, on top of the profile's
    #: ``launch_overhead_s`` (cudaLaunchKernel); used when ``overlap_launch`` (the host / device pipeline).
    host_overhead_per_kernel_s: float = 0.0
    #: more host time per vendor-library kernel (cuBLAS GEMM, cuDNN conv, fused attention) than per pointwise one,
    #: used with ``overlap_launch`` (:mod:`graphroof.timing.host`)
    host_overhead_per_library_call_s: float = 0.0
    #: the ops run PyTorch's ATen CUDA implementations, some of which launch several kernels (an fp16 inference
    #: batch norm, an attention that writes its scores: :mod:`graphroof.timing.host`)
    aten_ops: bool = False
    #: host / runtime time a request pays once before its first token, outside the kernels (the engine's generate
    #: call: buffer and decoder setup, host-device copies, sampling, the stop-check sync, output gather); added to
    #: the realistic TTFT (and so to e2e), never to the ideal roofline
    request_overhead_s: float = 0.0
    #: host time per running sequence per step, overlapped with the device (a server's per-token work for each
    #: sequence: sampling bookkeeping, incremental detokenization, streaming the token): a decode step takes at least
    #: this times its decoding sequences (realistic times only; graphroof.llm.evaluator, graphroof.llm.stepcost)
    host_per_sequence_s: float = 0.0
    #: host time an inference call spends before its first kernel can start (the framework's run() entry, input
    #: binding, the previous call's output copy and sync); with ``overlap_launch``, the first kernel's host stage
    #: (graphroof.roofline: a model-level analyze); 0 for engines timed from inside the call
    call_overhead_s: float = 0.0
    #: all-reduce implementation: ``nccl`` | ``custom`` (one-shot / two-shot, vLLM / TensorRT-LLM) | ``nvls``
    allreduce: str = "nccl"
    #: steps captured as CUDA graphs (None: derived, ``decode_launch == "step"``)
    cuda_graphs: bool | None = None
    #: decode attention reads each KV head once per GQA group (not once per query head)
    gqa_shared_kv: bool = True
    #: weight-only quantized GEMMs: ``fused_dequant`` (dequantize in the GEMM's main loop) | ``dequant_then_gemm``
    weight_only_gemm: str = "fused_dequant"
    #: MoE experts run as one grouped GEMM (True), one GEMM per visited expert (False), or as PyTorch's
    #: ``torch._grouped_mm`` runs them (``"torch"``: one grouped CUTLASS kernel on compute capability 9.x / 10.x with
    #: bf16, a loop of one ``mm`` per expert elsewhere; resolved against the device in graphroof.timing.moe).
    #: (values: preset_file.MOE_GROUPED_GEMM)
    moe_grouped_gemm: bool | str = True
    #: the engine runs its kernels back to back: a kernel whose traffic fits in half the L2 reads its input
    #: activations from L2, not DRAM (graphroof.timing.l2)
    l2_activations: bool = False
    #: how the dense GEMM library of the runtime schedules tiles on the device: ``auto`` (the profile's
    #: gemm_stream_k and overlap) | ``waves`` | ``stream_k`` (graphroof.timing.gemm.schedule_of)
    gemm_schedule: str = "auto"
    #: fused-attention kernel family: ``auto`` (the device's native kernel) | ``flash2`` | ``flash3`` | ``cudnn``
    #: (graphroof.timing.attention); an attention node's ``attention_kernel`` attribute overrides it
    attention_kernel: str = "auto"
    #: the stream kind a norm kernel (RMSNorm / LayerNorm, residual add fused) is priced as: ``norm`` (the profile's
    #: fitted norm rate) | ``elementwise`` (a one-pass kernel: each row read once, reduced on chip, scaled and
    #: written, at the profile's elementwise rate; graphroof.timing.stream.priced_kind)
    norm_stream: str = "norm"
    #: the host launches kernels asynchronously ahead of the device (a two-stage pipeline, see the docstring);
    #: False: each kernel's launch adds to its time (graphroof's model before presets had host overheads)
    overlap_launch: bool = False
    #: fp8 GEMM kernels (on devices with fp8 tensor cores)
    fp8_gemm: bool = False
    #: the fp8 quantize of an fp8 GEMM's input runs as a kernel of its own when the input comes from an attention
    #: kernel (a plugin the engine cannot fuse it into: TensorRT-LLM 0.5 / 0.6 before o_proj); False: fused into
    #: the producer or the GEMM, no kernel (graphroof.timing.gemm_plan.quantize_input_s)
    fp8_quantize_after_attention: bool = False
    #: a context-phase (prefill) attention runs, beside its fused attention kernel, the kernels of an attention
    #: plugin that does not fuse them: the sequence / padding offsets and one that adds the QKV bias, applies the
    #: rotary embedding and writes K / V into the KV cache (TensorRT-LLM 0.5 / 0.6 gpt_attention, enqueueContext);
    #: False: none (graphroof.timing.attention.context_prep_s)
    attention_context_prep: bool = False
    #: under TP the token embedding and LM head are split over the vocabulary (an all-reduce / all-gather after
    #: them); False: every rank holds and reads them whole, no collective (gpt-fast shards only attention and MLP)
    vocab_parallel: bool = True
    #: weights per scale of 4-bit weight-only GEMMs (graphroof.timing.quantgemm); None: its DEFAULT_GROUP (128)
    weight_only_group_size: int | None = None
    #: bytes per second one SM's matrix-vector kernel sustains (the kernel's bytes in flight per SM over the DRAM
    #: latency: Little's law); a GEMM of at most ``gemv_max_rows`` rows then streams no faster than
    #: ``sm_count x`` this (graphroof.timing.gemm_plan.gemv_time_s); 0: no such limit
    gemv_sm_bw_bytes_per_s: float = 0.0
    #: the same for the runtime's weight-only quantized matrix-vector kernel (0: gemv_sm_bw_bytes_per_s)
    gemv_quant_sm_bw_bytes_per_s: float = 0.0
    #: the share of the bandwidth that matrix-vector kernel sustains when its bytes in flight do not limit it
    #: (0: the profile's gemm_mem_bw_efficiency)
    gemv_mem_bw_efficiency: float = 0.0
    #: the most rows (tokens) per weight matrix the runtime runs as its quantized matrix-vector kernel (larger M:
    #: its GEMM library); 0: the runtime has no such kernel (every GEMM priced by the tile model)
    gemv_max_rows: int = 0
    #: the same for float (F16 / BF16) weights: its float matrix-vector kernel (0: none)
    gemv_float_max_rows: int = 0
    #: elements per SM per clock of PyTorch's non-vectorised elementwise kernels (an operand broadcast or cast:
    #: TensorIterator's offset-calculator path), a bound beside their bytes (graphroof.timing.aten); 0: none
    aten_strided_elements_per_sm_clock: float = 0.0
    #: elements per SM per clock of PyTorch's register softmax kernel (cunn_SoftMaxForwardReg: rows of 2,049-9,216
    #: elements, PyTorch >= 2.7), a bound beside its bytes (graphroof.timing.aten); 0: none
    aten_softmax_reg_elements_per_sm_clock: float = 0.0
    #: torch.autocast mixed precision: every GEMM / conv first casts its fp32 weight to the compute dtype, one more
    #: kernel (4 B read + 2 B written per weight, i.e. 3x the fp16 weight bytes) and one more launch per GEMM
    autocast: bool = False
    #: the engine and version range the preset describes (for listings and reports)
    engine: str = ""
    aliases: tuple[str, ...] = ()
    #: capability -> where the claim comes from (engine docs, source files)
    sources: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    #: the preset file it was read from ("" for one built in code)
    path: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.cuda_graphs is None:
            object.__setattr__(self, "cuda_graphs", self.decode_launch == "step")

    @property
    def host_per_kernel_s(self) -> float:
        """The preset's own host cost per launched kernel (the profile's launch overhead comes on top)."""
        return self.host_overhead_per_kernel_s if self.overlap_launch else 0.0

    def describe(self) -> str:
        return f"runtime preset {self.name}: {self.description}"


@functools.lru_cache(maxsize=1)
def _builtin() -> dict[str, Runtime]:
    out: dict[str, Runtime] = {}
    for p in sorted(PRESET_DIR.glob("*.toml")):
        rt = read_preset(p)
        out[rt.name] = rt
    return out


def read_preset(path: Path) -> Runtime:
    """The preset in the TOML file *path*, validated (:mod:`graphroof.fuse.preset_file`)."""
    return Runtime(**read_preset_fields(path))


def _aliases() -> dict[str, str]:
    return {a: rt.name for rt in _builtin().values() for a in rt.aliases}


#: the built-in presets by name (read from ``presets/*.toml`` once, at import)
RUNTIMES: dict[str, Runtime] = dict(_builtin())


def runtime_names() -> list[str]:
    """Preset names and their aliases, as ``--runtime`` accepts them."""
    return [*RUNTIMES, *_aliases()]


def get_runtime(runtime: str | Path | Runtime | None) -> Runtime:
    """A preset by name or alias (``None`` = ``eager``), a preset TOML file path, or a :class:`Runtime` as is."""
    if isinstance(runtime, Runtime):
        return runtime
    s = str(runtime or "eager")
    if s.endswith(".toml") or "/" in s:
        path = Path(s).expanduser()
        if not path.is_file():
            raise InputError(f"runtime preset file {s!r} not found; pass an existing .toml file or a preset name "
                             f"({', '.join(RUNTIMES)})")
        return read_preset(path)
    name = s.lower().replace("_", "-")
    name = _aliases().get(name, name)
    if name not in RUNTIMES:
        raise InputError(f"unknown runtime preset {s!r}; use one of: {', '.join(runtime_names())} (or a preset "
                         "TOML file; `graphroof runtimes` lists them)")
    return RUNTIMES[name]
