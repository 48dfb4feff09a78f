"""gpt-fast's runtime preset: 4-bit weight-only GEMMs at its README's group size 32 (``[kernels].weight_only_group``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from graphroof.errors import InputError
from graphroof.fuse.preset_file import preset_fields
from graphroof.fuse.runtimes import get_runtime
from graphroof.hardware import load_hardware
from graphroof.timing.gemm import gemm_time
from graphroof.timing.quantgemm import DEFAULT_GROUP, quant_group, scale_bytes
from graphroof.validate.llmrows import GPTFAST_PRESET


def test_preset_file_reads_and_checks_weight_only_group():
    assert preset_fields({"name": "x", "kernels": {"weight_only_group": 32}})["weight_only_group_size"] == 32
    assert "weight_only_group_size" not in preset_fields({"name": "x"})
    for bad in (0, 32.0, True, "32", 70000):
        with pytest.raises(InputError, match="weight_only_group"):
            preset_fields({"name": "x", "kernels": {"weight_only_group": bad}})


def test_gpt_fast_preset_states_group_32_and_cites_it():
    rt = get_runtime(str(GPTFAST_PRESET))
    assert rt.weight_only_group_size == 32 and "groupsize 32" in rt.sources["weight_only_group"]
    node = SimpleNamespace(attrs={})
    assert quant_group(node, rt) == 32
    assert quant_group(node, get_runtime("serving")) is None  # the others keep DEFAULT_GROUP
    assert DEFAULT_GROUP == 128


def test_int4_gemv_bytes_at_group_32_by_hand():
    # [1, 4096] x [4096, 4096] int4 weight-only GEMM:
    # packed weights 4096 * 4096 / 2                 = 8,388,608 B
    # scales + zeros, group 32: 4 B * 4096 * 4096 / 32 = 2,097,152 B   (group 128: 524,288 B)
    # activations in + out: 2 * 4096 * 2 B             =    16,384 B
    # total 10,502,144 B at group 32, 8,929,280 B at group 128 (+17.6%)
    assert scale_bytes(4096, 4096, 4, 32) == 2_097_152
    hw = load_hardware("a100-80gb-sxm")
    g32 = gemm_time(1, 4096, 4096, hw, "bf16", weight_dtype="int4", quant_group=32)
    g128 = gemm_time(1, 4096, 4096, hw, "bf16", weight_dtype="int4", quant_group=128)
    assert g32.bytes == pytest.approx(10_502_144)
    assert g128.bytes == pytest.approx(8_929_280)
    assert g32.t_s > g128.t_s  # a batch-1 GEMV streams its weights: more bytes, more time
