"""Runtime presets: which ops a runtime fuses into one kernel, and how it pays for launches.

Each preset is data (:class:`Runtime`), read by :func:`graphroof.fuse.fuse`:

============ ========= ========= ========== ========== ======== =====================================
preset       vector     epilogue  horizontal  BN folded  launch   models
             chains     into GEMM GEMMs
============ ========= ========= ========== ========== ======== =====================================
eager        no         no        no          no         per kernel  PyTorch eager, ONNX Runtime without
                                                                     graph optimisation: one kernel per op
compiled     yes        pointwise no          yes        per kernel  torch.compile (Inductor), XLA
serving      yes        no        yes         yes        per kernel  vLLM / TensorRT-LLM: fused (residual +)
                                                         in prefill,  RMSNorm, fused rotary, fused SiLU-and-
                                                         per step in  mul, flash attention, QKV and gate+up
                                                         decode       as one GEMM each; decode under CUDA
                                                         (CUDA graphs) graphs
============ ========= ========= ========== ========== ======== =====================================

* *vector chains*: connected elementwise, reduction and norm ops (and the casts, gathers and copies between
  them) become one kernel, as long as the kernel graph stays acyclic.
* *epilogue into GEMM*: a chain made only of pointwise ops (bias, activation, residual add, cast) whose first op
  reads a GEMM / conv output joins that GEMM's kernel; a chain with a reduction (a norm) stays its own kernel.
* *horizontal GEMMs*: GEMMs that read the same activation tensor with no path between them (Q, K and V; gate
  and up) run as one GEMM over the concatenated weights.
* *BN folded*: an inference batch-norm right after a conv is folded into the conv's weights (no kernel, no cost).
* *attention writes layout* (serving): the copy that puts attention's output back into [tokens, hidden] order
  is done by the attention kernel itself.
* Views and reshapes are free everywhere; attention ops are one kernel each (flash attention); collectives and
  ops without a counting rule are never fused.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError

__all__ = ["Runtime", "RUNTIMES", "get_runtime"]


@dataclass(frozen=True)
class Runtime:
    """A fusion + launch policy (see the module docstring for what each field means)."""

    name: str
    description: str
    fuse_vector_chains: bool = False
    fuse_epilogues: bool = False
    fuse_horizontal_gemms: bool = False
    fold_batch_norm: bool = False
    #: a copy with no FLOPs right after attention (transpose + contiguous back to [tokens, hidden]) is the
    #: attention kernel's output layout, not a kernel of its own (serving attention kernels write it directly).
    attention_writes_layout: bool = False
    #: ``"kernel"``: every kernel pays the profile's launch overhead; ``"step"``: the whole step is replayed as
    #: one CUDA graph and pays the profile's per-step graph-launch cost once (decode in serving engines).
    decode_launch: str = "kernel"

    def describe(self) -> str:
        return f"runtime preset {self.name}: {self.description}"


RUNTIMES: dict[str, Runtime] = {
    "eager": Runtime(
        "eager", "one kernel per op, each launched separately (PyTorch eager)"),
    "compiled": Runtime(
        "compiled", "elementwise / reduction / norm chains fused, pointwise epilogues fused into GEMMs and convs, "
        "batch-norm folded into convs (torch.compile / XLA)",
        fuse_vector_chains=True, fuse_epilogues=True, fold_batch_norm=True),
    "serving": Runtime(
        "serving", "fused (residual +) norms, rotary and activation kernels, flash attention, QKV and gate+up as "
        "one GEMM each, decode under CUDA graphs (vLLM / TensorRT-LLM)",
        fuse_vector_chains=True, fuse_horizontal_gemms=True, fold_batch_norm=True, attention_writes_layout=True,
        decode_launch="step"),
}


def get_runtime(runtime: str | Runtime | None) -> Runtime:
    """A preset by name (``None`` = ``eager``) or a :class:`Runtime` as is."""
    if isinstance(runtime, Runtime):
        return runtime
    name = (runtime or "eager").lower()
    if name not in RUNTIMES:
        raise InputError(f"unknown runtime preset {runtime!r}; use one of: {', '.join(RUNTIMES)}")
    return RUNTIMES[name]
