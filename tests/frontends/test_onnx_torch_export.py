"""Real exports: small torch modules through both torch.onnx exporters, a tiny Llama, onnxruntime quantization.

Totals are checked against numbers derived by hand (the arithmetic is in the comments).  Both exporters
decompose differently (Gemm vs MatMul + Add, Gelu vs Div/Erf/Add/Mul/Mul) but the FLOPs come out the same.
"""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

import graphroof  # noqa: E402
from graphroof.counters.cost import Cost  # noqa: E402
from tests.frontends._onnx_build import counted, total  # noqa: E402

EXPORTERS = ["dynamo", "torchscript"]


def export(module, args, path, exporter, dynamic=None):
    """torch.onnx.export with either exporter; *dynamic* = {input index: {axis: name}}."""
    module.eval()
    names = [f"in{i}" for i in range(len(args))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            ds = None
            if dynamic:
                ds = tuple({ax: torch.export.Dim(nm) for ax, nm in dynamic.get(i, {}).items()} or None
                           for i in range(len(args)))
            torch.onnx.export(module, args, str(path), dynamo=True, dynamic_shapes=ds, input_names=names,
                              verbose=False)
        else:
            torch.onnx.export(module, args, str(path), dynamo=False, input_names=names,
                              dynamic_axes={names[i]: ax for i, ax in (dynamic or {}).items()})
    return path


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(2)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv1(x)))
        x = torch.nn.functional.adaptive_avg_pool2d(self.conv2(x), 1).flatten(1)
        return self.head(x)


class Block(torch.nn.Module):
    """Pre-norm transformer block, attention written out: D=16, 2 heads of 8, MLP 32, exact GELU."""

    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(16), torch.nn.LayerNorm(16)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(16, 16) for _ in range(4))
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)

    def forward(self, x):
        b, s, _ = x.shape
        h = self.ln1(x)
        q, k, v = (p(h).reshape(b, s, 2, 8).transpose(1, 2) for p in (self.q, self.k, self.v))
        att = torch.softmax((q @ k.transpose(-2, -1)) * 0.125, dim=-1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(b, s, 16))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_mlp(tmp_path, exporter):
    p = export(MLP(), (torch.randn(4, 16),), tmp_path / "mlp.onnx", exporter, {0: {0: "batch"}})
    g = counted(p, dims={"batch": 4})
    c = total(g)
    assert c.matrix_flops == 2 * 4 * 32 * 16 + 2 * 4 * 8 * 32   # 4096 + 2048 = 6144
    assert c.vector_flops == 4 * 32 + 4 * 32 + 4 * 8           # bias 128 + relu 128 + bias 32 = 288
    assert c.weight_bytes == (16 * 32 + 32 + 32 * 8 + 8) * 4    # every parameter read once: 3232
    assert c == Cost(6144, 288, 3232, act_read_bytes=(64 + 128 + 128) * 4, act_write_bytes=(128 + 128 + 32) * 4)
    assert {op.scope for op in g.ops()} == {"fc1", "fc2", ""} | ({""} if exporter == "dynamo" else set())


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_conv_net(tmp_path, exporter):
    p = export(ConvNet(), (torch.randn(1, 3, 16, 16),), tmp_path / "cnn.onnx", exporter)
    c = total(counted(p))
    # conv1: Y [1,8,16,16] = 2048 outputs x 3*9 MACs -> 2*2048*27 = 110592; conv2: Y [1,16,4,4] = 256 x 8*9
    # -> 36864; head: 2*16*10 = 320
    assert c.matrix_flops == 110592 + 36864 + 320
    # conv1 bias 2048 + relu 2048 + maxpool 512 x 3 + conv2 bias 256 + global average 256 + head bias 10
    assert c.vector_flops == 2048 + 2048 + 1536 + 256 + 256 + 10
    assert c.weight_bytes >= (8 * 27 + 8 + 16 * 72 + 16 + 160 + 10) * 4


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_transformer_block(tmp_path, exporter):
    p = export(Block(), (torch.randn(1, 8, 16),), tmp_path / "block.onnx", exporter)
    g = counted(p)
    c = total(g)
    # projections q, k, v, o, fc1, fc2 on 8 tokens: 2*8*16*16 x 4 + 2*8*32*16 x 2 = 16384 + 16384;
    # scores and P@V: 2 heads x 8 x 8 x 8 MACs each = 2 * 1024 x 2 = 4096
    assert c.matrix_flops == 16384 + 16384 + 4096
    # LN 7*128 x 2 = 1792; biases 128 x 5 + 256 = 896; scale 128; softmax 5*128 = 640; residuals 2 x 128;
    # GELU (erf form) 5 * 256 = 1280
    assert c.vector_flops == 1792 + 896 + 128 + 640 + 256 + 1280
    params = 2 * 32 + 4 * (256 + 16) + (512 + 32) + (512 + 16)
    assert c.weight_bytes == params * 4 + 4  # every parameter once, plus the fp32 scale constant
    layers = {op.scope for op in g.ops() if op.op.endswith(("MatMul", "Gemm"))}
    assert {"q", "k", "v", "o", "fc1", "fc2"} <= layers


@pytest.mark.slow
def test_tiny_llama_dynamo_export_per_layer_rows(tmp_path):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    torch.manual_seed(0)
    lm = transformers.LlamaForCausalLM(cfg).eval()

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model, self.lm_head = lm.model, lm.lm_head

        def forward(self, input_ids):
            return self.lm_head(self.model(input_ids=input_ids, use_cache=False).last_hidden_state)

    p = export(Logits(), (torch.randint(0, 128, (2, 16)),), tmp_path / "llama.onnx", "dynamo",
               {0: {0: "batch", 1: "seq"}})
    a = graphroof.analyze(p, hw="a100", dims={"batch": 2, "seq": 32}, strict=True, depth=2)  # strict: no unknown ops
    names = [r["name"] for r in a.layers]
    assert {"model.layers.0", "model.layers.1", "lm_head"} <= set(names)
    rows = {r["name"]: r for r in a.layers}
    # per layer, projections on 64 tokens: q, o 64x64; k, v 64x32 (2 KV heads x 16); gate, up 64x128; down 128x64
    proj = 2 * 64 * (64 * 64 * 2 + 64 * 32 * 2 + 64 * 128 * 3)
    # attention on 2 x 4 heads, 32 x 32 scores, head 16: (QK^T + PV) 2 * 8 * 32 * 32 * 16 * 2
    attn = 2 * 8 * 32 * 32 * 16 * 2
    assert rows["model.layers.0"]["matrix_flops"] == proj + attn
    assert rows["lm_head"]["matrix_flops"] == 2 * 64 * 128 * 64
    assert a.summary.n_unknown == 0
    # embedding lookup reads only the 64 rows it indexes (64 x 64 fp32), not the 128-row table
    emb = next(r for r in a.ops if r["op"] == "onnx.Gather" and r["scope"] == "model.embed_tokens")
    assert emb["weight_bytes"] == 64 * 64 * 4


def test_onnxruntime_quantized_models(tmp_path):
    ort_q = pytest.importorskip("onnxruntime.quantization")
    p = export(MLP(), (torch.randn(4, 16),), tmp_path / "mlp.onnx", "torchscript")
    q = tmp_path / "mlp_int8.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ort_q.quantize_dynamic(str(p), str(q), weight_type=ort_q.QuantType.QInt8)
    g = counted(q)
    ops = {o.op for o in g.ops()}
    assert {"onnx.DynamicQuantizeLinear", "onnx.MatMulInteger"} <= ops
    c = total(g)
    assert c.matrix_flops == 6144                       # the same products, now int8
    assert c.weight_bytes < (16 * 32 + 32 * 8) * 4      # int8 weights: a quarter of the fp32 bytes (plus biases)
    mm = [o for o in g.ops() if o.op == "onnx.MatMulInteger"]
    assert all(o.attrs["compute_dtype"] == "int8" for o in mm)


def test_matmul_nbits_quantizer(tmp_path):
    pytest.importorskip("onnxruntime.quantization")
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    class Wide(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(64, 32, bias=False)

        def forward(self, x):
            return self.proj(x)

    p = export(Wide(), (torch.randn(1, 4, 64),), tmp_path / "wide.onnx", "torchscript")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qz = MatMulNBitsQuantizer(onnx.load(str(p)), block_size=32, is_symmetric=True)
        qz.process()
    qp = tmp_path / "wide_q4.onnx"
    onnx.save(qz.model.model, str(qp))
    g = counted(qp)
    nb = next(o for o in g.ops() if o.op == "com.microsoft.MatMulNBits")
    c = total(g)
    assert c.matrix_flops == 2 * 4 * 32 * 64
    # B packed: N=32 x 2 blocks x 16 bytes = 1024; scales fp32 [64] = 256 (symmetric: no zero points)
    assert nb.inputs[1].nbytes == 1024 and c.weight_bytes == 1024 + 256


def test_bert_fused_by_onnxruntime_optimizer(tmp_path):
    """Legacy export of a tiny BERT, fused by onnxruntime.transformers (SkipLayerNormalization, BiasGelu)."""
    transformers = pytest.importorskip("transformers")
    optimizer = pytest.importorskip("onnxruntime.transformers.optimizer")
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    bert = transformers.BertModel(cfg, add_pooling_layer=False).eval()

    class Hidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, ids, mask, types):
            return self.bert(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state

    args = (torch.randint(0, 100, (1, 8)), torch.ones(1, 8, dtype=torch.int64), torch.zeros(1, 8, dtype=torch.int64))
    p = export(Hidden(), args, tmp_path / "bert.onnx", "torchscript", {i: {0: "batch", 1: "seq"} for i in range(3)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = optimizer.optimize_model(str(p), model_type="bert", num_heads=2, hidden_size=32)
    q = tmp_path / "bert_opt.onnx"
    opt.save_model_to_file(str(q))
    a = graphroof.analyze(q, hw="a100", dims={"batch": 1, "seq": 64}, strict=True, depth=3)
    kinds = {r["op"] for r in a.ops}
    assert {"com.microsoft.SkipLayerNormalization", "com.microsoft.BiasGelu"} <= kinds
    rows = {r["name"]: r for r in a.layers}
    # the fused ops join the layer of the projection they follow: both layers cost the same
    assert rows["bert.encoder.layer.0"]["flops"] == rows["bert.encoder.layer.1"]["flops"]
    # per layer: q, k, v, o 2*64*32*32 each, FFN 2*64*32*64 twice, scores and P@V 2 * (2 heads * 64*64*16) each
    assert rows["bert.encoder.layer.0"]["matrix_flops"] == 4 * 131072 + 2 * 262144 + 2 * 262144
    skip = [r for r in a.ops if r["op"] == "com.microsoft.SkipLayerNormalization"]
    assert all(r["vector_flops"] == (7 + 1 + 1) * 64 * 32 for r in skip)  # LayerNorm + skip + bias per element
