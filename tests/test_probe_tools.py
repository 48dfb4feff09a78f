"""tools/probe_moe_gpu.py and tools/probe_kernels_gpu.py (run on a lent GPU; their rows are in
graphroof/validate/data/h200_probe): the parts that need no GPU, checked on the CPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools import probe_kernels_gpu, probe_moe_gpu  # noqa: E402


def test_naive_attention_is_attention():
    # the benchmark's unfused baseline (scaled Q K^T into a score buffer, softmax, P V) equals fused SDPA
    torch.manual_seed(0)
    qkv = torch.randn(2, 16, 3, 4, 8)
    q, k, v = (t.transpose(1, 2) for t in qkv.unbind(dim=2))
    out = probe_kernels_gpu.naive_attention(qkv)
    assert out.shape == (2, 4, 16, 8)
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v), atol=1e-5)


def test_grouped_cases_cross_the_tile_edges():
    cases = probe_moe_gpu._cases()
    for shape, (experts, _, _) in probe_moe_gpu.SHAPES.items():
        pers = {p for s, t, p in cases if s == shape and t == experts}
        # PyTorch's sm90 kernel: a 64-row tile at <= 128 mean rows per group, 2 x 1 clusters: both sides of 64 and 128
        assert {64, 65, 128, 129} <= pers
    assert ("mixtral.gate_up", 1, 1) in cases and len(cases) == 43


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU refusal")
@pytest.mark.parametrize("tool", [probe_moe_gpu, probe_kernels_gpu])
def test_refuses_without_a_gpu(tool, monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "argv", ["probe", "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit, match="no CUDA device"):
        tool.main()
    assert not (tmp_path / "o").exists()


def test_decode_part_sees_the_steps_own_views():
    # the decode part asks PyTorch's SDPA dispatcher about Q as the step passes it: a view of the fused QKV output,
    # batch stride (32 + 2 x 8) x 128 = 6,144, not a contiguous [b, 32, 1, 128] tensor
    q, k, v = probe_kernels_gpu.decode_step_views(2, 16, "cpu")
    assert q.shape == (2, 32, 1, 128) and q.stride() == (6144, 128, 128, 1) and not q.is_contiguous()
    assert k.shape == v.shape == (2, 8, 16, 128)
    names = {n for n in dir(torch.nn.attention.SDPBackend) if n.isupper()}  # a pybind11 enum: not iterable
    assert "FLASH_ATTENTION" in names and probe_kernels_gpu.sdpa_backend(q, k, v) in names
    assert probe_kernels_gpu.DECODE[0] == (1, 1024) and {b for b, _ in probe_kernels_gpu.DECODE} >= {1, 8, 64}
