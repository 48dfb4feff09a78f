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


def test_gpt_fast_preset_fuses_qkv_keeps_gate_up_and_keeps_vocab_whole():
    rt = get_runtime(str(GPTFAST_PRESET))
    assert rt.fuse_horizontal_gemms and not rt.fuse_gate_up and not rt.vocab_parallel
    for key in ("horizontal_gemms", "gate_up", "vocab_parallel"):
        assert "gpt-fast" in rt.sources[key]
    assert get_runtime("serving").vocab_parallel  # every other preset splits the vocabulary under TP
    assert preset_fields({"name": "x", "kernels": {"vocab_parallel": False}})["vocab_parallel"] is False
    with pytest.raises(InputError, match="vocab_parallel"):
        preset_fields({"name": "x", "kernels": {"vocab_parallel": "no"}})


def test_whole_vocab_per_rank_adds_half_the_embedding_and_lm_head_at_tp2():
    # Llama-2-7B: token embedding and LM head are each 32000 x 4096 bf16 = 262,144,000 B.
    # Split over the vocabulary at TP 2 each rank holds half of both (262,144,000 B in all); kept whole (gpt-fast's
    # tp.py) each rank holds both whole: 262,144,000 B more per GPU, and each decode step reads the whole LM head.
    import dataclasses

    import graphroof.llm as llm

    rt = get_runtime(str(GPTFAST_PRESET))
    whole = llm.estimate("llama-2-7b", hw="a100", prompt=128, gen=2, batch=1, tp=2, runtime=rt).configs[0]
    split = llm.estimate("llama-2-7b", hw="a100", prompt=128, gen=2, batch=1, tp=2,
                         runtime=dataclasses.replace(rt, vocab_parallel=True)).configs[0]
    assert whole.weight_bytes - split.weight_bytes == pytest.approx(262_144_000)
    assert whole.tpot_s > split.tpot_s
