"""``moe_grouped_gemm = "torch"``: PyTorch's ``torch._grouped_mm`` is one CUTLASS grouped GEMM on compute capability
9.x / 10.x (bf16) and a loop of one ``mm`` per expert elsewhere (graphroof.timing.moe.grouped_gemm_on), read
against the hardware profile's ``compute_capability``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import tomllib

import graphroof
from graphroof.errors import HardwareProfileError, InputError
from graphroof.fuse.preset_file import preset_fields
from graphroof.fuse.runtimes import get_runtime
from graphroof.hardware import list_profiles, load_hardware, profile_from_dict
from graphroof.timing.moe import grouped_gemm_on
from graphroof.validate.kernels import grouped_mm_graph

PROFILES = Path(__file__).resolve().parent.parent / "hw_profiles"
PYTORCH_PRESETS = ("compiled", "pytorch-eager", "pytorch-eager-amp", "pytorch-cuda-graph")


# -- the preset value --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", PYTORCH_PRESETS)
def test_pytorch_presets_run_grouped_mm_as_torch_does(name):
    rt = get_runtime(name)
    assert rt.moe_grouped_gemm == "torch"
    assert "GroupMM.cu" in rt.sources["moe_grouped_gemm"] and "GroupedMMUtils.h" in rt.sources["moe_grouped_gemm"]


@pytest.mark.parametrize("value", [True, False, "torch"])
def test_preset_parses_true_false_and_torch(value):
    kw = preset_fields({"name": "x", "kernels": {"moe_grouped_gemm": value}})
    assert kw["moe_grouped_gemm"] == value and type(kw["moe_grouped_gemm"]) is type(value)


@pytest.mark.parametrize("value", ["yes", "true", 1, 0, "Torch"])
def test_preset_rejects_other_values(value):
    with pytest.raises(InputError, match=r"moe_grouped_gemm must be one of true, false, \"torch\""):
        preset_fields({"name": "x", "kernels": {"moe_grouped_gemm": value}})


def test_other_presets_keep_their_booleans():
    assert get_runtime("tensorrt-llm").moe_grouped_gemm is True and get_runtime("tensorrt").moe_grouped_gemm is False
    # vLLM-like presets run the Triton fused-MoE kernel (tests/test_triton_moe_kernel.py)
    assert get_runtime("serving").moe_grouped_gemm == "triton"


# -- the resolution ----------------------------------------------------------------------------------------------
def test_grouped_gemm_on_by_compute_capability():
    h100, b200, a100, l4 = (load_hardware(n) for n in ("h100", "b200", "a100", "l4"))
    assert grouped_gemm_on("torch", h100, "bf16") and grouped_gemm_on("torch", b200, "bf16")   # sm90, sm100
    assert not grouped_gemm_on("torch", a100, "bf16") and not grouped_gemm_on("torch", l4, "bf16")  # 8.0, 8.9
    assert not grouped_gemm_on("torch", h100, "fp16")        # the CUTLASS kernel is bf16 only: fallback loop
    assert not grouped_gemm_on("torch", load_hardware("mi300x-192gb-oam"), "bf16")  # no compute capability: loop
    assert grouped_gemm_on(True, a100) and not grouped_gemm_on(False, h100)        # booleans as given


def _kernel_s(hw: str, runtime) -> float:
    """The one-op grouped GEMM's kernel time (no launch): 8 experts, 64 rows (32 tokens x top-2), K 256, N 512, all
    8 experts visited."""
    g = grouped_mm_graph(8, 64, 256, 512, "bf16", top_k=2, experts_touched=8)
    ks = graphroof.analyze(g, hw=hw, runtime=runtime).to_dict()["kernels"]
    assert len(ks) == 1
    return float(ks[0]["time_realistic_s"] - ks[0].get("t_launch_s", 0.0))


def test_compiled_on_h100_has_no_per_expert_latency():
    compiled = get_runtime("compiled")
    one = _kernel_s("h100", dataclasses.replace(compiled, moe_grouped_gemm=True))
    loop = _kernel_s("h100", dataclasses.replace(compiled, moe_grouped_gemm=False))
    # compute capability 9.0, bf16: one grouped kernel, PyTorch's CUTLASS one (family torch_grouped, its own tile and
    # a second small kernel: tests/test_torch_grouped_kernel.py), no launch per expert.  8 experts of 8 rows, K 256,
    # N 512: tile 64 x 128 (8 rows <= 128), 2 M tiles per expert (the cluster pair) x 4 N tiles x 8 = 64 tiles, one
    # wave; one CTA's 2 x 64 x 128 x 256 = 4.194 MFLOP at 794.5e12 x 0.902 / 132 = 5.429e12 per SM, starved by
    # the L2 to 2 x 64 x 128 / (192 x 2) / (989.4e12 / 20.6e12) = 0.8883: 0.8697 us; below the bytes' time: A 64 x
    # 256 x 2 = 32,768 + C 64 x 512 x 2 = 65,536 + B 8 x 256 x 512 x 2 = 2,097,152 = 2,195,456 B on the 64 SMs
    # holding tiles at torch_grouped_sm_bw_bytes_per_s 21e9 each (1.344e12 B/s, under 3.35e12 x 0.886) = 1.6335 us,
    # + gemm_latency_s 4.71 us + stream_latency_s 1.65 us = 7.9935 us (the 32 B of offsets: 1e-5 us)
    assert _kernel_s("h100", compiled) == pytest.approx(7.9935e-6, rel=1e-4)
    assert _kernel_s("h100", compiled) < loop - 6 * 4.71e-6
    # the loop pays (V - 1) x gemm_latency_s = (8 - 1) x 4.71 us (h100-sxm [timing]) = 32.97 us more
    assert loop - one == pytest.approx(7 * 4.71e-6, rel=1e-9)
    assert load_hardware("h100").timing.gemm_latency_s == 4.71e-6


def test_compiled_on_a100_keeps_the_per_expert_latency():
    compiled = get_runtime("compiled")
    one = _kernel_s("a100", dataclasses.replace(compiled, moe_grouped_gemm=True))
    loop = _kernel_s("a100", dataclasses.replace(compiled, moe_grouped_gemm=False))
    # compute capability 8.0: PyTorch's _grouped_mm_fallback, one mm per expert, as moe_grouped_gemm = false
    assert _kernel_s("a100", compiled) == pytest.approx(loop, rel=1e-12)
    # (8 - 1) x 5.34 us (a100-80gb-sxm [timing] gemm_latency_s) = 37.38 us above the grouped kernel
    assert _kernel_s("a100", compiled) - one == pytest.approx(7 * 5.34e-6, rel=1e-9)
    assert load_hardware("a100").timing.gemm_latency_s == 5.34e-6


# -- the profile field -------------------------------------------------------------------------------------------
EXPECTED_CC = {"h100-sxm": "9.0", "h100-pcie": "9.0", "h200-sxm": "9.0", "b200-sxm": "10.0", "a100-40gb-sxm": "8.0",
               "a100-80gb-pcie": "8.0", "a100-80gb-sxm": "8.0", "a30-24gb-pcie": "8.0", "a10-24gb-pcie": "8.6",
               "a10g-24gb": "8.6", "a40-48gb-pcie": "8.6", "l4-24gb-pcie": "8.9", "l40s-48gb-pcie": "8.9", "rtx-4090-24gb": "8.9",
               "rtx-3090-24gb": "8.6", "rtx-a6000-48gb": "8.6", "rtx-5090-32gb": "12.0",
               "t4-16gb-pcie": "7.5", "v100-sxm2-32gb": "7.0", "jetson-agx-orin-64gb": "8.7"}


def test_shipped_profiles_carry_their_compute_capability():
    for hw in list_profiles():
        if hw.vendor == "NVIDIA":
            assert hw.compute_capability == EXPECTED_CC[hw.name], hw.name
            assert "developer.nvidia.com/cuda-gpus" in hw.sources["compute_capability"]
        else:
            assert hw.compute_capability is None, hw.name
    assert load_hardware("h100").as_dict()["compute_capability"] == "9.0"


def _h100(**top) -> dict:
    data = tomllib.loads((PROFILES / "h100-sxm.toml").read_text(encoding="utf-8"))
    data.update(top)
    return data


def test_profile_field_parses():
    assert profile_from_dict(_h100(compute_capability="12.0"), Path("x.toml")).compute_capability == "12.0"
    data = _h100()
    del data["compute_capability"]
    assert profile_from_dict(data, Path("x.toml")).compute_capability is None


@pytest.mark.parametrize("value", ["sm90", "9", "9.0.1", "", 9.0, 90])
def test_profile_field_bad_value_is_a_clear_error(value):
    with pytest.raises(HardwareProfileError, match=r"compute_capability must be .*\"major.minor\" string"):
        profile_from_dict(_h100(compute_capability=value), Path("x.toml"))


def test_profile_field_needs_its_source():
    data = _h100()
    del data["sources"]["compute_capability"]
    with pytest.raises(HardwareProfileError, match="compute_capability needs its source"):
        profile_from_dict(data, Path("x.toml"))
