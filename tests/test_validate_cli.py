"""``graphroof validate`` prices every row through the path users run: a sampled row of each LLM dataset gives the
same figure as the command the row names, run in-process (``graphroof.cli.main``), to 1e-9; a Vidur layer row
gives the per-op breakdown of ``Engine.step`` (the Python API: the CLI's layer tables fold the attention kernel
into the attention block).  Each case traces a 7B model once in the validation and once in the CLI (the trace
store is off in tests), 10-30 s each on a busy 2-core machine: one LLM row, the Vidur row and the vision rows
run by default, the other LLM rows are marked slow."""

from __future__ import annotations

import json
import shlex

import pytest

from graphroof.validate import validate


def _cli_json(cmd: str, capsys) -> dict:
    from graphroof.cli import main

    argv = shlex.split(cmd)
    assert argv[0] == "graphroof"
    capsys.readouterr()
    assert main(argv[1:]) == 0
    return json.loads(capsys.readouterr().out)


def _priced(row_id: str, dataset: str):
    r = validate(dataset, only=[row_id])
    [row] = [x for x in r.rows if x.row_id == row_id]
    assert row.scored, (row.excluded, row.not_covered)
    return row


@pytest.mark.parametrize("row_id,dataset", [
    ("trtllm_v05_v061_static.csv:17", "trtllm"),   # H100 fp8 Llama-2-7B, first token of 128 prompt tokens
    pytest.param("nim_llm_h100.csv:3", "nim", marks=pytest.mark.slow),  # NIM Llama-3.1-8B fp8, ITL at 200 / 200
    pytest.param("gptfast_decode.csv:11", "gptfast", marks=pytest.mark.slow),  # A100 Llama-2-7B int8 batch-1 decode
    pytest.param("trtllm_v05_v061_static.csv:11", "trtllm", marks=pytest.mark.slow),  # A100 fp16 static batch 60
])
def test_llm_rows_equal_the_cli(row_id, dataset, capsys):
    row = _priced(row_id, dataset)
    cmd, _, what = row.command.partition(" -f json: ")
    d = _cli_json(cmd + " -f json", capsys)
    cfg = d["configs"][0]
    if what in ("configs[0].ttft_s", "configs[0].tpot_s"):
        cli = cfg[what.split(".", 1)[1]]
    elif what.startswith("configs[0].output_tokens_per_s / "):
        cli = cfg["output_tokens_per_s"] / int(what.rsplit("/", 1)[1])
    else:
        assert what == "configs[0].output_tokens_per_s"
        cli = cfg["output_tokens_per_s"] / row.inputs["batch"]
    assert row.predicted == pytest.approx(cli, rel=1e-9)


def test_vidur_layer_row_equals_the_engine_breakdown():
    from graphroof.llm import Engine, Pricing
    from graphroof.validate.vidur import PRESET

    row = _priced("vidur_h100_Llama-2-7b-hf_ops.csv:400", "vidur_ops")
    n, tp = row.inputs["tokens"], row.inputs["tp"]
    assert PRESET == "sarathi-serve" and row.runtime == PRESET and f"--runtime {PRESET}" in row.command
    eng = Engine("llama-2-7b", hw="h100-sxm", pricing=Pricing(tp=tp, runtime=PRESET), dtype="fp16")
    ks = eng.step("prefill", 1, n).to_dict()["kernels"]
    mine = [k for k in ks if (k["scope"] == "model.layers.0" or k["scope"].startswith("model.layers.0."))
            and k["time_model"] != "attention" and not k["time_model"].startswith("collective")
            and set(k["op_keys"]) != {"kv_cache.append"}]
    assert len(mine) == 10   # norm, QKV, rope (q), rope (k) + KV store, O, norm, gate+up, act, down, add
    assert row.predicted == pytest.approx(sum(k["time_realistic_s"] - k["t_launch_s"] for k in mine), rel=1e-9)


@pytest.mark.parametrize("row_id", ["vision_encoder.csv:553",    # TensorRT BERT-base (SQuAD head) fp16 on T4, batch 8
                                    "vision_encoder.csv:291",    # Paddle + TensorRT ResNet-50 fp16 on A10, batch 8
                                    # FasterTransformer BERT-base fp32 on V100, batch 8: --attention naive (no fused
                                    # MHA on Volta) --matmul-precision highest (FP32 math) in the command
                                    pytest.param("vision_encoder.csv:991", marks=pytest.mark.slow)])
def test_vision_rows_equal_the_cli(row_id, capsys):
    row = _priced(row_id, "vision")
    cmd, _, what = row.command.partition(" -f json: ")
    assert what.startswith("totals time_realistic_s")
    t = _cli_json(cmd + " -f json", capsys)["totals"]["time_realistic_s"]
    assert row.predicted == pytest.approx(row.inputs["batch"] / t if row.is_rate else t, rel=1e-9)


@pytest.mark.parametrize("row_id", [
    "h200_unseen/models.csv:5",       # blind set: ResNet-18 fp16 batch 16, CUDA-graph replay, H200
    "h200_unseen/models.csv:21",      # BERT-large encoder, seq 384, batch 8, CUDA-graph replay
    # decode.csv rows name a graphroof.analyze call (tests/test_decoder_step.py)
])
def test_blind_torch_gpu_rows_equal_the_cli(row_id, capsys):
    # the blind set's rows (graphroof/validate/data/h200_unseen) name their own model and command: the zoo's
    # resnet-18, the bert-large encoder config (not the resnet-50 / bert-base of the earlier sessions)
    row = _priced(row_id, "torch_gpu")
    assert row.engine.endswith("blind set")
    cmd, _, what = row.command.partition(" -f json: ")
    assert what == "totals.time_realistic_s"
    assert row.predicted == pytest.approx(_cli_json(cmd + " -f json", capsys)["totals"]["time_realistic_s"], rel=1e-9)


def test_the_help_names_every_dataset():
    """``graphroof validate --help`` lists the registry's datasets (written out in the CLI so that building the
    parser imports nothing)."""
    from graphroof.cli.validate import DATASET_NAMES
    from graphroof.validate.run import DATASETS

    assert DATASET_NAMES == tuple(DATASETS)
