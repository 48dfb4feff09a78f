"""The attention rows of graphroof/validate/data/kernels.csv: which are scored (fully stated), which stay not covered
and why, the source's FLOPs arithmetic, and that a scored row is priced by the same call as the torch_gpu rows."""

from __future__ import annotations

import pytest

from graphroof.hardware import load_hardware
from graphroof.validate.context import Context
from graphroof.validate.kernels import attention_family, attention_row_plan, kernel_rows, naive_attention_time_s
from graphroof.validate.torchgpu import attention_time_s


@pytest.fixture(scope="module")
def rows():
    return {r.row_id: r for r in kernel_rows(Context()) if r.family == "attention"}


def _row(**kw: str) -> dict[str, str]:
    base = {"batch": "32", "nheads": "32", "seqlen": "512", "headdim": "64", "causal": "False", "direction": "fwd",
            "implementation": "FA2 2.7.4.post1 (Flash2)", "graphroof_hw": "b200-sxm", "dtype": "fp16 (default)",
            "time_ms": "", "tflops": "308.40"}
    return base | kw


def test_flops_arithmetic_by_hand():
    # kernels.csv:121 (flash-attention issue 1589, B200, FA2 fwd, batch 32, 32 heads, 512 tokens, head dim 64, not
    # causal, 308.40 TFLOP/s, no time_ms): FLOPs = 4 b h s^2 d = 4 x 32 x 32 x 512^2 x 64 = 68,719,476,736
    # (benchmark_flash_attention.py flops(); TFLOP/s = flops / time / 1e12), so the time is
    # 68,719,476,736 / 308.40e12 = 0.22283 ms
    plan, why = attention_row_plan(_row())
    assert why == ""
    assert plan["flops"] == 68_719_476_736
    assert plan["time_s"] == pytest.approx(0.22283e-3, rel=1e-4)
    assert plan["time_from"] == "flops / tflops"
    # causal halves the FLOPs: 34,359,738,368 at the same TFLOP/s is half the time
    assert attention_row_plan(_row(causal="True"))[0]["time_s"] == pytest.approx(0.22283e-3 / 2, rel=1e-4)
    # both figures given: kernels.csv:78's H20 FA2 row (batch 2, 2048 tokens, head dim 64, 0.840 ms, 81.8 TFLOP/s)
    # with 32 heads (= 2048 / 64) is 4 x 2 x 32 x 2048^2 x 64 = 68,719,476,736 FLOPs; 81.8e12 x 0.840e-3 = 6.871e10
    # (-0.01%): agrees, and the measured time is time_ms
    plan, why = attention_row_plan(_row(batch="2", seqlen="2048", time_ms="0.840", tflops="81.8"))
    assert why == "" and plan["time_s"] == pytest.approx(0.840e-3) and plan["time_from"] == "time_ms"
    # 5% more time than the TFLOP/s imply (> 2%): the source's work is unclear, not covered
    plan, why = attention_row_plan(_row(batch="2", seqlen="2048", time_ms="0.882", tflops="81.8"))
    assert plan == {} and "+5.0%" in why and "FLOPs" in why


def test_every_missing_fact_is_named():
    why = attention_row_plan(_row(direction="fwd? (not stated)", nheads="", causal="(default; not stated)",
                                  dtype="bf16? (not stated)", graphroof_hw="h100-sxm? (variant not stated)",
                                  implementation="Triton tutorial FA2"))[1]
    for part in ("direction 'fwd? (not stated)'", "nheads not stated as an integer", "causal '(default; not stated)'",
                 "dtype 'bf16? (not stated)' not stated", "uncertain profile mapping",
                 "no graphroof kernel family for 'Triton tutorial FA2'"):
        assert part in why
    assert "no graphroof profile 'nope-gpu'" in attention_row_plan(_row(graphroof_hw="nope-gpu"))[1]
    assert "not stated" in attention_row_plan(_row(dtype="(not stated)"))[1]


def test_family_mapping():
    assert attention_family("FA2 (Fav2)") == attention_family("FA2 2.7.4.post1 (Flash2)") == "flash2"
    assert attention_family("FA3") == attention_family("FA3 (flash_v3)") == attention_family("FA3 (Fav3)") == "flash3"
    assert attention_family("cuDNN") == "cudnn"
    assert attention_family("PyTorch naive attention") == "naive"
    assert attention_family("Triton tutorial FA2") is None
    assert attention_family("Triton (fused attention)") is None


def test_scored_and_not_covered_rows(rows):
    scored = sorted(k for k, r in rows.items() if r.scored)
    # the B200 rows of flash-attention issue 1589 (the only fully stated ones): FA2 and PyTorch naive, forward
    assert len(rows) == 60 and len(scored) == 11
    assert {rows[k].regime for k in scored} == {"fwd attention (flash2)", "fwd attention (naive)"}
    assert all(rows[k].gpu == "b200-sxm" and rows[k].figure == "kernel-time" for k in scored)
    assert rows["kernels.csv:123"].runtime == "pytorch-eager" and rows["kernels.csv:121"].runtime == "compiled"
    nc = {k: r.not_covered for k, r in rows.items() if not r.scored}
    assert nc["kernels.csv:122"] == "direction 'bwd' is not a stated forward pass"   # FA2 backward
    assert "nheads not stated" in nc["kernels.csv:78"] and "no graphroof profile" in nc["kernels.csv:78"]  # H20
    assert "no graphroof kernel family for 'Triton (fused attention)'" in nc["kernels.csv:102"]
    assert "causal '(default; not stated)'" in nc["kernels.csv:108"]  # tritonbench FA3, h100-sxm? mapping
    assert "uncertain profile mapping" in nc["kernels.csv:108"]


def test_scored_row_is_attention_time_s(rows):
    hw = load_hardware("b200-sxm")
    fa2 = rows["kernels.csv:121"]
    assert fa2.predicted == attention_time_s(hw, 32, 32, 32, 512, 512, 64, False, "fp16", kernel="flash2")
    assert fa2.measured == pytest.approx(68_719_476_736 / 308.40e12)
    naive = rows["kernels.csv:123"]
    assert naive.predicted == naive_attention_time_s(hw, 32, 32, 32, 512, 512, 64, False, "fp16")
    # the naive byte model writes the scores: slower than the fused kernel on the same shape
    assert naive.predicted > attention_time_s(hw, 32, 32, 32, 512, 512, 64, False, "fp16", kernel="cudnn")
