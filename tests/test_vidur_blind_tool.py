"""tools/vidur_blind.py: Vidur's other models priced as graphroof validate prices the bundled vidur_ops rows."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools import vidur_blind  # noqa: E402

STATS = ("emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj", "post_attention_layernorm",
         "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cols = [f"time_stats.{s}.median" for s in STATS] + ["n_head", "n_kv_head", "n_embd", "n_expanded_embd",
                                                           "vocab_size", "use_gated_mlp", "num_tokens",
                                                           "num_tensor_parallel_workers"]
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)


def _row(tokens: int, ms: float, gated: str = "True") -> dict:
    r = {f"time_stats.{s}.median": ms for s in STATS}
    r.update(n_head=32, n_kv_head=32, n_embd=4096, n_expanded_embd=11008, vocab_size=32768, use_gated_mlp=gated,
             num_tokens=tokens, num_tensor_parallel_workers=1)
    return r


def test_measured_sum_and_first_row(tmp_path):
    p = tmp_path / "mlp.csv"
    _write(p, [_row(8, 0.01), _row(8, 0.05), _row(1, 0.02)])
    rows = vidur_blind.read_rows(p)
    # the first row of (8 tokens, TP 1) is kept; sorted by tokens
    assert [n for n, _ in rows[1]] == [1, 8] and float(rows[1][1][1]["time_stats.add.median"]) == 0.01
    # 2 norms + QKV + rope + O + gate/up + act + down + 2 adds = 10 kernels (no embedding) x 0.02 ms = 0.2 ms
    assert vidur_blind.measured_s(rows[1][0][1]) == pytest.approx(10 * 0.02e-3, rel=1e-12)


def test_stand_in_prices_as_the_zoo_model_and_skips_ungated(tmp_path):
    # a Llama-2-7B-shaped model under a name graphroof has no zoo entry for: its Llama-shaped stand-in (from the
    # row's columns) gives the zoo llama-2-7b's layer-0 kernels (the vocab does not reach layer 0)
    root = tmp_path / "data" / "profiling" / "compute" / "h100"
    _write(root / "someorg" / "llama2-copy" / "mlp.csv", [_row(1, 0.1), _row(512, 0.2)])
    _write(root / "microsoft" / "phi-2" / "mlp.csv", [_row(1, 0.1, gated="False")])
    rows = vidur_blind.score(tmp_path)
    assert [(r[0], r[2], r[3]) for r in rows] == [("someorg/llama2-copy", 1, 1), ("someorg/llama2-copy", 1, 512)]
    from graphroof.hardware import load_hardware
    from graphroof.llm.engine import Engine, Pricing
    from graphroof.validate.vidur import PRESET, layer_kernel_times

    eng = Engine("llama-2-7b", hw=load_hardware("h100-sxm"), pricing=Pricing(tp=1, runtime=PRESET), dtype="fp16")
    zoo = layer_kernel_times(eng, [1, 512], [eng.hw])[0]
    assert [r[5] for r in rows] == [pytest.approx(float(t), rel=1e-9) for t in zoo]
    assert [r[4] for r in rows] == [pytest.approx(1e-3), pytest.approx(2e-3)]


def test_not_a_vidur_checkout_is_a_clear_error(tmp_path, capsys):
    assert vidur_blind.main(["--vidur", str(tmp_path)]) == 1
    assert "give a checkout of microsoft/vidur" in capsys.readouterr().err


def test_send_recv_rows_price_the_pp_transfer(tmp_path):
    # one Vidur DGX send / recv row inside an H100 node and one across two: priced by send_recv_time, the transfer
    # graphroof llm --pp charges per stage boundary (h100-sxm: 7.39 us + 2,048 B / 360e9 B/s inside the node;
    # 17.63 us + 2,048 B / 40e9 B/s, the GPU's NIC share, across nodes)
    path = tmp_path / "data" / "profiling" / "network" / "h100_dgx" / "send_recv.csv"
    path.parent.mkdir(parents=True)
    path.write_text(",time_stats.send_recv.median,num_workers,size,devices_per_node\n"
                    "0,0.005,2,2048,2\n1,0.017,2,2048,1\n", encoding="utf-8")
    rows = vidur_blind.send_recv_rows(tmp_path)
    assert [(r[0], r[1], r[3], r[4]) for r in rows] == [("send/recv intra-node", "h100-sxm", 2048, pytest.approx(5e-6)),
                                                        ("send/recv inter-node", "h100-sxm", 2048, pytest.approx(17e-6))]
    assert rows[0][5] == pytest.approx(7.39e-6 + 2048 / 360e9, rel=1e-12)
    assert rows[1][5] == pytest.approx(17.63e-6 + 2048 / 40e9, rel=1e-12)
