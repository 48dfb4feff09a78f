"""Issue 23 (vision / encoder rows): the sustained matmul rates fitted for the A10 (150 W), the T4's and V100's
CUDA-core SGEMM, and the source-given exclusion of the TensorRT 10.11 "A30" table, each checked by hand."""

from __future__ import annotations

import csv

import pytest

from graphroof.hardware import load_hardware
from graphroof.timing.precision import gemm_ceiling, matmul_peak
from graphroof.validate.data import DATA_DIR, excluded_reason, exclusions


def _ceiling(name: str, dtype: str, precision: str = "high") -> tuple[float, str, float, str]:
    hw = load_hardware(name)
    peak, key = matmul_peak(hw, dtype, precision)
    ceiling, how = gemm_ceiling(hw, peak, key)
    return peak, key, ceiling, how


def test_a10_tensor_rate_is_power_limited():
    # 125 TFLOP/s fp16 / bf16 at the 1695 MHz boost; fitted sustained 79 TFLOP/s = 0.632 of it, i.e. the
    # MAMF-typical 0.803 of peak at 1695 * 0.632 / 0.803 = 1334 MHz (the 150 W board limit)
    peak, key, ceiling, how = _ceiling("a10-24gb-pcie", "fp16")
    assert (peak, key) == (125e12, "matrix.fp16")
    assert ceiling == 79e12 and how == "achievable.bf16"  # fp16 runs at the bf16 rate
    assert 1695 * (ceiling / peak) / 0.803 == pytest.approx(1334, abs=1)
    # TF32 (fp32 under "high") scales by the same achievable / peak ratio: 62.5 * 79 / 125 = 39.5 TFLOP/s
    peak, key, ceiling, how = _ceiling("a10-24gb-pcie", "fp32")
    assert (peak, key) == (62.5e12, "matrix.tf32")
    assert ceiling == pytest.approx(39.5e12) and how == "peak x bf16 achievable/peak"
    src = load_hardware("a10-24gb-pcie").sources["timing"]
    assert "fitted" in src and "1334 MHz" in src and "43.74 ms" in src


def test_t4_sgemm_rate_is_its_own_fit():
    # fp32 on Turing (no TF32) runs as CUDA-core SGEMM: 8.1 TFLOP/s peak, fitted 4.6 TFLOP/s = 0.568 of it
    # (before: the tensor-core ratio 31 / 65 = 0.477 applied to it, 8.1 * 0.477 = 3.86 TFLOP/s)
    peak, key, ceiling, how = _ceiling("t4-16gb-pcie", "fp32", "highest")
    assert (peak, key) == (8.1e12, "vector.fp32")
    assert ceiling == 4.6e12 and how == "achievable.fp32"
    assert ceiling / peak == pytest.approx(0.568, abs=0.001)
    assert 8.1e12 * 31e12 / 65e12 == pytest.approx(3.86e12, rel=1e-3)
    # the fp16 tensor rate is unchanged (31 TFLOP/s, fitted on the TensorRT 7.2 BERT-large row)
    assert _ceiling("t4-16gb-pcie", "fp16")[2:] == (31e12, "achievable.fp16")


def test_v100_sgemm_rate_is_its_own_fit():
    # 15.7 TFLOP/s fp32 peak; fitted 13.5 TFLOP/s = 0.86 of it (before: the MAMF 0.803 -> 12.6 TFLOP/s)
    peak, key, ceiling, how = _ceiling("v100-sxm2-32gb", "fp32", "highest")
    assert (peak, key) == (15.7e12, "vector.fp32")
    assert ceiling == 13.5e12 and how == "achievable.fp32"
    assert ceiling / peak == pytest.approx(0.86, abs=0.001)
    assert _ceiling("v100-sxm2-32gb", "fp16")[2:] == (1.004e14, "achievable.fp16")


def test_trt_10_11_a30_table_is_excluded_for_its_source_history():
    # NVIDIA/TensorRT demo/BERT/README.md: the "A30" table at 9973b2f4 (lines 550-629) is the table published at
    # 37c01d41 under "NVIDIA L4", figure for figure: all 80 rows of it (2 models x 2 seq x 10 batches x 2
    # precisions) leave scoring; the TensorRT 8.5.1 A30 rows and the 10.11 L40S rows (lines 632-) stay
    rules = exclusions()
    with open(DATA_DIR / "vision_encoder.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    hit = [r for r in rows if "L4'" in excluded_reason("vision", r, rules)]
    assert len(hit) == 80 == 2 * 2 * 10 * 2
    assert all(r["gpu"] == "NVIDIA A30" and r["framework"].startswith("TensorRT 10.11") for r in hit)
    kept = [r for r in rows if r["framework"].startswith(("TensorRT 8.5.1", "TensorRT 10.11"))
            and not excluded_reason("vision", r, rules)]
    assert {(r["gpu"], r["framework"][:14]) for r in kept} == {
        ("NVIDIA A30", "TensorRT 8.5.1"), ("NVIDIA T4 (16GB)", "TensorRT 8.5.1"), ("NVIDIA L40S", "TensorRT 10.11")}
    assert "37c01d41" in excluded_reason("vision", hit[0], rules)
