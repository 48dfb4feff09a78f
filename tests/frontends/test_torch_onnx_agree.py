"""The same small models through the PyTorch frontend and through ``torch.onnx.export`` + the ONNX frontend:
FLOPs and weight bytes agree within 1%.

The two graphs differ in form (the ONNX exporter decomposes attention into MatMul / Softmax, layer norms may
stay whole or not, BatchNorm is folded or kept) but both count the same work on the same weights.
"""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxscript")
torch = pytest.importorskip("torch")

import graphroof  # noqa: E402
from graphroof.frontends.torch.zoo_models import Block  # noqa: E402
from tests.frontends.torch_models import SmallCNN  # noqa: E402


class TinyViTish(torch.nn.Module):
    """Two pre-norm transformer blocks (fused QKV, SDPA, GELU MLP) and a head: d=64, 4 heads, MLP 128."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.Sequential(Block(64, 4, 128), Block(64, 4, 128))
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.blocks(x)[:, 0])


def _both(module, args, tmp_path, kwargs=None, **settings):
    """(torch frontend totals, ONNX frontend totals) of one module; the exporter's graph optimisations are off
    so that BatchNorm is not folded into the convolution before the ONNX frontend sees it."""
    module.eval()
    path = tmp_path / "m.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(path), kwargs=kwargs, dynamo=True, optimize=False, verbose=False)
        via_onnx = graphroof.analyze(str(path), hw="a100", **settings)
    inputs = dict(kwargs or {}, input_ids=args[0]) if kwargs else list(args)
    via_torch = graphroof.analyze(module, inputs, hw="a100", **settings)
    assert via_onnx.summary.n_unknown == 0 and via_torch.summary.n_unknown == 0
    return via_torch.totals.cost, via_onnx.totals.cost


def _agree(t, o):
    assert t.flops == pytest.approx(o.flops, rel=0.01)
    assert t.matrix_flops == pytest.approx(o.matrix_flops, rel=0.01)
    # ONNX: tensors computed only from weights / constants (rotary tables, masks; optimize=False keeps them in
    # the graph) are folded at load and read as weights; torch computes them per forward: within 2 %
    assert t.weight_bytes == pytest.approx(o.weight_bytes, rel=0.02)


@pytest.mark.parametrize("make, shape", [(SmallCNN, (2, 3, 16, 16)), (TinyViTish, (2, 17, 64))])
def test_torch_and_onnx_frontends_agree(make, shape, tmp_path):
    torch.manual_seed(0)
    _agree(*_both(make(), (torch.randn(*shape),), tmp_path))


def test_tiny_llama_agrees(tmp_path):
    """A transformers Llama (2 layers, GQA 4/2 heads): the ONNX graph has the causal mask as data and the
    attention as MatMul / Softmax over the full square, so both sides count the full square here."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=1000,
                                   max_position_embeddings=256)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg)
    ids = torch.zeros(1, 16, dtype=torch.long)
    t, o = _both(model, (ids,), tmp_path, kwargs={"use_cache": False}, causal="full")
    _agree(t, o)
    assert t.matrix_flops == o.matrix_flops   # GEMMs and attention products: identical
