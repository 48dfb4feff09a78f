"""Default inputs of transformers models from their configs: both towers of CLIP / SigLIP (images from
``vision_config``, text length from ``text_config``), Whisper's log-mel features, decoder tokens of seq2seq models,
and one error line naming an input that cannot be defaulted."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")
pytest.importorskip("graphroof.frontends.torch.export", reason="needs the PyTorch frontend")

import graphroof  # noqa: E402
from graphroof.cli import main  # noqa: E402
from graphroof.errors import InputError  # noqa: E402
from graphroof.frontends import zoo  # noqa: E402
from graphroof.frontends.hf import build as hf
from graphroof.graph import COST  # noqa: E402

# tiny CLIP: text tower 2 layers d=32 over 16 positions, vision tower 2 layers d=48 on 32x32 images, 8x8 patches
CLIP = dict(model_type="clip", architectures=["CLIPModel"], projection_dim=24,
            text_config=dict(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_hidden_layers=2,
                             max_position_embeddings=16, vocab_size=100),
            vision_config=dict(hidden_size=48, intermediate_size=96, num_attention_heads=2, num_hidden_layers=2,
                               image_size=32, patch_size=8, num_channels=3))
SIGLIP = dict(model_type="siglip", architectures=["SiglipModel"],
              text_config=dict(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_hidden_layers=1,
                               max_position_embeddings=12, vocab_size=100, bos_token_id=None, eos_token_id=1,
                               pad_token_id=1),
              vision_config=dict(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_hidden_layers=1,
                                 image_size=16, patch_size=4, num_channels=3))


def _inputs(data, **kw):
    model, cfg, _ = hf.build_model(data)
    return hf.model_inputs(model, cfg, batch=kw.pop("batch", 1), seq=kw.pop("seq", None), name="m", **kw)


@pytest.mark.parametrize("name, ids, image", [("clip-vit-b-32", 77, 224), ("siglip-base", 64, 224)])
def test_zoo_two_tower_defaults(name, ids, image):
    inputs, notes = _inputs(hf.read_config(zoo.config_path(name)))
    assert inputs["input_ids"] == ((1, ids), "int64")            # text_config.max_position_embeddings
    assert inputs["pixel_values"][0] == (1, 3, image, image)     # vision_config.image_size, num_channels
    assert any("text_config.max_position_embeddings" in n for n in notes)


def test_zoo_whisper_and_t5_defaults():
    inputs, _ = _inputs(hf.read_config(zoo.config_path("whisper-large-v3")), batch=2)
    assert inputs["input_features"][0] == (2, 128, 3000)         # 128 mel bins x (2 x 1500 encoder positions)
    assert inputs["decoder_input_ids"] == ((2, 448), "int64")    # max_target_positions
    inputs, _ = _inputs(hf.read_config(zoo.config_path("t5-base")), seq=64)
    assert inputs["input_ids"] == inputs["decoder_input_ids"] == ((1, 64), "int64")


def _scope_flops(a, prefix: str) -> float:
    return sum(a.graph.get(op.name, COST).matrix_flops for op in a.graph.ops() if op.scope.startswith(prefix))


def test_clip_analyze_counts_both_towers(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(CLIP))
    a = graphroof.analyze(str(p), hw="h100")
    d = 48
    n = (32 // 8) ** 2 + 1   # 16 patches + the class token
    # vision tower: patch conv (2 * 16 patches * 48 outputs * 3*8*8 inputs) + per layer q, k, v, o (4 * 2 n d d),
    # MLP (2 * 2 n d 96) and bidirectional attention over all n x n pairs (2 * n * n * (2 * d))
    layer = 4 * 2 * n * d * d + 2 * 2 * n * d * 96 + 2 * n * n * 2 * d
    assert _scope_flops(a, "vision_model") == 2 * 16 * d * 3 * 64 + 2 * layer
    t, S = 32, 16            # the text tower runs on 16 tokens (text_config.max_position_embeddings), causal
    text_layer = 4 * 2 * S * t * t + 2 * 2 * S * t * 64 + 2 * (S * (S + 1) // 2) * 2 * t
    assert _scope_flops(a, "text_model") == 2 * text_layer
    assert _scope_flops(a, "visual_projection") == 2 * 48 * 24 and _scope_flops(a, "text_projection") == 2 * 32 * 24


def test_siglip_analyze_end_to_end_and_named_input_keeps_other_defaults(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(SIGLIP))
    a = graphroof.analyze(str(p), hw="h100", input_shapes={"pixel_values": (2, 3, 16, 16)}, batch=2)
    conv = [op for op in a.graph.ops() if op.op == "aten.conv2d"]
    assert conv[0].inputs[0].shape == (2, 3, 16, 16)             # as given
    emb = [op for op in a.graph.ops() if op.scope == "text_model.embeddings.token_embedding"]
    assert emb[0].inputs[1].shape == (2, 12)                     # defaulted: batch 2 x 12 text positions
    assert _scope_flops(a, "text_model") > 0 and _scope_flops(a, "vision_model") > 0


WAV2VEC2 = dict(model_type="wav2vec2", architectures=["Wav2Vec2Model"], hidden_size=32, num_hidden_layers=1,
                num_attention_heads=2, intermediate_size=64, conv_dim=[8, 8], conv_stride=[5, 2], conv_kernel=[10, 3],
                num_feat_extract_layers=2, num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2)


def test_missing_input_is_one_line_naming_it(tmp_path, capsys):
    with pytest.raises(InputError, match=r"no default for input 'input_values'.*--input input_values=SHAPE"):
        _inputs(WAV2VEC2)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(WAV2VEC2))
    assert main(["analyze", str(p)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("graphroof: error: ") and "input_values" in err and "\n" not in err
    assert "Traceback" not in err
