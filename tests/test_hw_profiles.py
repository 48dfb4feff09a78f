"""The shipped hardware profiles (hw_profiles/*.toml): they load, carry sources, and hold known datasheet values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib

from graphroof import hardware
from graphroof.hardware import list_profiles, load_hardware

REPO_PROFILES = Path(__file__).resolve().parent.parent / "hw_profiles"


def _raw(path: str | Path) -> dict:
    return tomllib.loads(Path(path).read_text(encoding="utf-8"))


# alias -> profile name: every device the project promises to ship
REQUIRED = {
    "a100": "a100-80gb-sxm",
    "a100-40gb": "a100-40gb-sxm",
    "a100-pcie": "a100-80gb-pcie",
    "v100": "v100-sxm2-32gb",
    "t4": "t4-16gb-pcie",
    "a10": "a10-24gb-pcie",
    "a10g": "a10g-24gb",
    "l4": "l4-24gb-pcie",
    "l40s": "l40s-48gb-pcie",
    "h100": "h100-sxm",
    "h100-pcie": "h100-pcie",
    "h200": "h200-sxm",
    "b200": "b200-sxm",
    "rtx4090": "rtx-4090-24gb",
    "4090": "rtx-4090-24gb",
    "rtx3090": "rtx-3090-24gb",
    "5090": "rtx-5090-32gb",
    "a6000": "rtx-a6000-48gb",
    "orin": "jetson-agx-orin-64gb",
    "jetson-orin": "jetson-agx-orin-64gb",
    "mi250x": "mi250x-128gb-oam",
    "mi300x": "mi300x-192gb-oam",
    "tpu-v4": "tpu-v4-32gb",
    "tpu-v5e": "tpu-v5e-16gb",
    "v5e": "tpu-v5e-16gb",
    "tpu-v5p": "tpu-v5p-95gb",
    "tpu-v6e": "tpu-v6e-32gb",
    "trillium": "tpu-v6e-32gb",
    "gaudi2": "gaudi2-96gb-oam",
    "gaudi3": "gaudi3-128gb-oam",
    "spr": "xeon-platinum-8480plus",
}


def test_every_shipped_profile_loads():
    profiles = list_profiles()
    assert len(profiles) >= 23
    for p in profiles:
        assert Path(p.path).parent == REPO_PROFILES
        assert p.name == Path(p.path).stem, f"{p.path}: name must equal the file stem"
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", p.name), p.name
        assert p.display_name and p.vendor
        assert p.matrix_peak_flops_per_s
        assert 1e10 <= p.mem_bw_bytes_per_s <= 1e14, p.name
        assert p.mem_capacity_bytes and p.mem_capacity_bytes >= 1e9, p.name


def test_every_required_device_reachable_by_alias():
    for alias, name in REQUIRED.items():
        assert load_hardware(alias).name == name, alias
        assert load_hardware(alias.upper()).name == name, alias  # lookup is case-insensitive


def test_aliases_unique_and_not_another_profiles_name():
    profiles = list_profiles()
    names = {p.name for p in profiles}
    owner: dict[str, str] = {}
    for p in profiles:
        for a in p.aliases:
            assert a == a.lower(), f"{p.name}: alias {a!r} must be lower case"
            assert a not in owner, f"alias {a!r} on both {owner[a]} and {p.name}"
            owner[a] = p.name
            assert a not in names - {p.name}, f"{p.name}: alias {a!r} is another profile's name"


def test_sources_for_every_section_present():
    for p in list_profiles():
        raw = _raw(p.path)
        sources = raw.get("sources", {})
        for section in ("matrix_peak_flops_per_s", "memory", "efficiency"):
            assert section in raw, f"{p.name}: [{section}] missing"
        for section in ("matrix_peak_flops_per_s", "vector_peak_flops_per_s", "memory", "interconnect", "efficiency"):
            if section in raw:
                text = sources.get(section, "")
                assert isinstance(text, str) and len(text) > 20, f"{p.name}: sources.{section} missing"
        assert "assumption" in sources["efficiency"].lower(), f"{p.name}: efficiency must be labelled an assumption"


def test_efficiencies_and_interconnect_sane():
    for p in list_profiles():
        for e in (p.matrix_efficiency, p.vector_efficiency, p.mem_bw_efficiency, p.interconnect_efficiency):
            assert 0 < e <= 1, p.name
        assert 0 < p.launch_overhead_s < 1e-4, p.name
        if "interconnect" in _raw(p.path):
            assert p.interconnect_name and p.interconnect_bw_bytes_per_s and p.interconnect_bw_bytes_per_s > 1e9, p.name


def test_no_sparse_figure_slipped_in():
    """Dense peaks keep the hardware's dtype ratios; a lone 2:4-sparse (2x) figure would break them."""
    for p in list_profiles():
        m = p.matrix_peak_flops_per_s
        if "bf16" in m and "fp8" in m:
            assert m["fp8"] <= 2.05 * m["bf16"], p.name  # L40S prints 733 vs 362.05 (2.02x)
        if "bf16" in m and "tf32" in m:
            assert m["tf32"] <= 0.55 * m["bf16"], p.name
        if "bf16" in m and "int8" in m:
            assert m["int8"] <= 4.01 * m["bf16"], p.name  # RTX 4090: int8 660.6 vs bf16 (FP32 acc) 165.2


@pytest.mark.parametrize("alias, table, dtype, value", [
    # NVIDIA H100 datasheet "1,979* TFLOPS BF16" is with sparsity; dense 989.4 (H100 architecture whitepaper)
    ("h100", "matrix", "bf16", 989.4e12),
    ("h100", "matrix", "fp8", 1978.9e12),
    ("h100", "vector", "fp32", 66.9e12),
    # NVIDIA A100 datasheet: BF16 312 dense (624* sparse)
    ("a100", "matrix", "bf16", 312e12),
    # Google Cloud TPU v5e docs: 197 TFLOPs bf16 per chip
    ("tpu-v5e", "matrix", "bf16", 197e12),
    # Google Cloud TPU v4 docs: 275 teraflops (bf16 or int8)
    ("tpu-v4", "matrix", "bf16", 275e12),
    # Google Cloud TPU v5p docs / launch blog: 459 TFLOPs bf16, 918 TOPs int8
    ("tpu-v5p", "matrix", "int8", 918e12),
    # Google Cloud TPU v6e docs: 918 TFLOPs bf16
    ("trillium", "matrix", "bf16", 918e12),
    # AMD MI300X datasheet: BF16 1,307.4 dense (2,614.9 with sparsity)
    ("mi300x", "matrix", "bf16", 1307.4e12),
    # NVIDIA L4 datasheet: BF16 242* (sparse) -> 121 dense
    ("l4", "matrix", "bf16", 121e12),
    # NVIDIA Blackwell datasheet, HGX B200: FP16/BF16 4.5 PFLOPS* (sparse) -> 2.25 dense
    ("b200", "matrix", "bf16", 2.25e15),
    # Intel Gaudi 3 (Hot Chips 2024): BF16 matrix 1835, BF16 vector 28.7 TFLOPs
    ("gaudi3", "matrix", "bf16", 1835e12),
    ("gaudi3", "vector", "bf16", 28.7e12),
    # NVIDIA T4 datasheet: 65 FP16 TFLOPS (no bf16 on Turing: bf16 falls back to fp16)
    ("t4", "matrix", "bf16", 65e12),
    # Xeon 8480+: 56 cores x 2.0 GHz x 1024 AMX BF16 FLOPs/cycle
    ("spr", "matrix", "bf16", 56 * 2.0e9 * 1024),
    # GA102 whitepaper, RTX 3090 (GeForce: FP32-accumulate tensor rate = half of FP16-accumulate 142)
    ("3090", "matrix", "bf16", 71e12),
    # GA102 whitepaper V2.0, RTX A6000: 84 SMs x 1024 FLOP/clk x 1.80 GHz = 154.8 (full rate with FP32 accumulate)
    ("a6000", "matrix", "fp16", 154.8e12),
    # RTX Blackwell whitepaper, RTX 5090: 170 SMs x 512 FLOP/clk x 2.407 GHz = 209.5; FP8 (FP32 acc.) twice that
    ("5090", "matrix", "bf16", 209.5e12),
    ("5090", "matrix", "fp8", 419e12),
])
def test_known_peaks(alias, table, dtype, value):
    assert load_hardware(alias).peak(table, dtype)[0] == pytest.approx(value, rel=1e-9)


@pytest.mark.parametrize("alias, bw, capacity", [
    # capacity: the device total the runtime reports (torch total_memory / cudaMemGetInfo; rocm-smi), not the
    # datasheet's "80 GB" read as decimal bytes: NVIDIA's HBM figures are GiB (5 x 16 GiB stacks), less the driver's share
    ("a100", 2.039e12, 85.0e9),    # A100 80GB SXM datasheet 2,039 GB/s; torch 79.14 GiB x 2^30 = 84.98e9 B
    ("a100-40gb", 1.555e12, 42.3e9),  # A100 40GB SXM datasheet 1,555 GB/s; deviceQuery 42,298,834,944 B
    ("h100", 3.35e12, 85.0e9),     # H100 SXM datasheet 3.35 TB/s; our session's total_memory 85,017,493,504 B
    ("h200", 4.8e12, 150.1e9),     # H200 datasheet 4.8 TB/s; our session's total_memory 150,109,880,320 B
    ("mi300x", 5.3e12, 206.1e9),   # MI300X datasheet 5.3 TB/s; rocm-smi VRAM total 206,141,652,992 B
    ("t4", 320e9, 15.6e9),         # T4 datasheet 320 GB/s; torch 14.56 GiB x 2^30 = 15.63e9 B (GDDR6, ECC on)
    ("tpu-v5e", 819e9, 16e9),      # Google Cloud TPU v5e docs: 16 GB, 819 GBps
    ("tpu-v4", 1.2e12, 32 * 2**30),  # Google Cloud TPU v4 docs: 32 GiB, 1200 GBps
    ("tpu-v5p", 2.765e12, 95e9),   # Google Cloud TPU v5p docs: 95 GB, 2765 GBps
    ("orin", 204.8e9, 64e9),       # Jetson AGX Orin 64GB: LPDDR5 204.8 GB/s
    ("3090", 936e9, 25.44e9),      # 19.5 Gbps x 384 bit / 8 = 936 GB/s; torch 23.69 GiB x 2^30 = 25.44e9 B
    ("a6000", 768e9, 51.05e9),     # datasheet 768 GB/s; torch 47.54 GiB x 2^30 = 51.05e9 B (ECC on)
    ("5090", 1.792e12, 33.68e9),   # 28 Gbps x 512 bit / 8 = 1,792 GB/s; deviceQuery 33,677,180,928 B
])
def test_known_memory(alias, bw, capacity):
    p = load_hardware(alias)
    assert p.mem_bw_bytes_per_s == pytest.approx(bw)
    assert p.mem_capacity_bytes == pytest.approx(capacity)


def test_interconnect_is_per_direction():
    assert load_hardware("h100").interconnect_bw_bytes_per_s == pytest.approx(450e9)   # NVLink 900 GB/s bidirectional
    assert load_hardware("b200").interconnect_bw_bytes_per_s == pytest.approx(900e9)   # NVLink 5: 1.8 TB/s bidirectional
    assert load_hardware("v5e").interconnect_bw_bytes_per_s == pytest.approx(200e9)    # ICI 400 GBps bidirectional


def test_gpu_tensor_peak_exceeds_cuda_core_fp32():
    gpus = [p for p in list_profiles() if p.kind == "gpu"]
    assert len(gpus) >= 15
    for p in gpus:
        assert p.peak("matrix", "bf16")[0] > p.peak("vector", "fp32")[0], p.name


def test_h100_ridge_point():
    # 989.4 TFLOP/s dense BF16 / 3.35 TB/s = ~295 FLOP/byte
    assert load_hardware("h100").ridge_point("bf16") == pytest.approx(989.4e12 / 3.35e12)
    assert 290 < load_hardware("h100").ridge_point("bf16") < 300


def test_profile_dir_is_this_checkouts():
    assert hardware.profile_dir().resolve() == REPO_PROFILES
