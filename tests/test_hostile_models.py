"""Tiny hostile models and grids have a bounded cost (issue 26): ONNX shape inference under a memory budget taken
from the available memory, nested local functions refused before inlining, implausible tensors warned about,
transformers config sizes in plausible ranges, ``architectures`` naming a non-model, sweep grids past 100,000
points refused unless ``--force``.  Every hostile input is generated here; CLI runs are subprocesses under an
address-space limit and a timeout."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
import warnings

import pytest

from graphroof.cli import main
from graphroof.errors import FrontendError, GraphroofWarning, InputError
from graphroof.frontends.hf.limits import check_config_values
from graphroof.sweeps.limits import check_grid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(args: list[str], mem_gb: float = 3.0, timeout: float = 120, **env: str) -> tuple[int, str, str, float]:
    """``graphroof ARGS`` in a subprocess under RLIMIT_AS = *mem_gb* and *timeout*: (rc, stdout, stderr, seconds)."""
    def limit() -> None:
        b = int(mem_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (b, b))

    e = {**os.environ, "GRAPHROOF_CACHE": "off", **env}
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "graphroof", *args], preexec_fn=limit, env=e, cwd=ROOT,
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t


def _one_line_error(rc: int, err: str) -> str:
    lines = err.strip().splitlines()
    assert rc == 1 and len(lines) == 1 and lines[0].startswith("graphroof: error: "), err
    return lines[0]


# -- ONNX -------------------------------------------------------------------------------------------------------

onnx = pytest.importorskip("onnx")
from onnx import TensorProto  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402


def _save(tmp_path, m, name="m.onnx") -> str:
    p = tmp_path / name
    onnx.save(m, str(p))
    return str(p)


def _range_model():
    """137 bytes: Range(0, 2^40) feeding an Add; ONNX's data propagation grows it element by element."""
    import numpy as np

    inits = [nh.from_array(np.array(v, dtype=np.int64), n) for n, v in (("s", 0), ("l", 2**40), ("d", 1))]
    g = h.make_graph([h.make_node("Range", ["s", "l", "d"], ["r"]), h.make_node("Add", ["r", "x"], ["y"])], "range",
                     [h.make_tensor_value_info("x", TensorProto.INT64, [1])],
                     [h.make_tensor_value_info("y", TensorProto.INT64, None)], initializer=inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _nested_model(depth: int, recursive: bool = False):
    """Local function f_i calls f_(i-1) twice, *depth* levels: inlines to 2^depth nodes."""
    ops = [h.make_opsetid("", 17), h.make_opsetid("local", 1)]
    funcs = []
    for i in range(depth):
        if i == 0:
            body = [h.make_node("f0" if recursive else "Relu", ["x"], ["y"], domain="local" if recursive else "")]
        else:
            body = [h.make_node(f"f{i - 1}", ["x"], ["t"], domain="local"),
                    h.make_node(f"f{i - 1}", ["t"], ["y"], domain="local")]
        funcs.append(h.make_function("local", f"f{i}", ["x"], ["y"], body, ops))
    g = h.make_graph([h.make_node(f"f{depth - 1}", ["x"], ["y"], domain="local")], "nest",
                     [h.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return h.make_model(g, opset_imports=ops, functions=funcs)


def test_default_memory_budget_is_half_the_available_memory(tmp_path, monkeypatch):
    from graphroof.frontends.onnx import guard as onnx_guard

    info = tmp_path / "meminfo"
    info.write_text("MemTotal:       24684092 kB\nMemAvailable:    8000000 kB\n")
    assert onnx_guard.available_bytes(str(info)) == 8_000_000 * 1024
    monkeypatch.delenv("GRAPHROOF_INFER_MEM_GB", raising=False)
    monkeypatch.setattr(onnx_guard, "available_bytes", lambda: 8 * 10**9)
    b = onnx_guard.default_budget()
    assert b.mem_bytes == 4 * 10**9 and "half of the 8 GB available memory" in b.origin
    monkeypatch.setattr(onnx_guard, "available_bytes", lambda: 100 * 10**9)
    assert onnx_guard.default_budget().mem_bytes == onnx_guard.MAX_DEFAULT_MEM == 16 * 10**9
    monkeypatch.setenv("GRAPHROOF_INFER_MEM_GB", "0.25")
    assert onnx_guard.default_budget().mem_bytes == 25 * 10**7


def test_range_2_pow_40_runs_out_of_a_small_budget_with_one_error(tmp_path):
    from graphroof.frontends.onnx.load import load_onnx

    p = _save(tmp_path, _range_model())
    assert os.path.getsize(p) < 200
    t = time.monotonic()
    with pytest.raises(FrontendError, match=r"ran out of its memory budget of 0.3 GB \(the infer_mem_gb argument; set GRAPHROOF_INFER"):
        load_onnx(p, infer_mem_gb=0.3)
    assert time.monotonic() - t < 60


def test_range_2_pow_40_cli_states_the_limit_that_applied(tmp_path):
    p = _save(tmp_path, _range_model())
    rc, out, err, secs = _cli(["analyze", p], mem_gb=2.0, timeout=120, GRAPHROOF_INFER_MEM_GB="")
    line = _one_line_error(rc, err)
    assert "ran out of its memory budget" in line and "address-space limit" in line and not out
    assert secs < 120


def test_nested_local_functions_are_refused_before_inlining(tmp_path):
    p = _save(tmp_path, _nested_model(30))
    assert os.path.getsize(p) < 4000
    rc, out, err, secs = _cli(["analyze", p], mem_gb=2.0, timeout=60)
    line = _one_line_error(rc, err)
    assert "local functions expand to more than 1,000,000 nodes when inlined" in line
    assert secs < 60


def test_inlined_size_counts_calls_and_refuses_recursion(tmp_path):
    from graphroof.frontends.onnx.limits import inlined_size
    from graphroof.frontends.onnx.load import load_onnx

    assert inlined_size(_nested_model(5)) == 2**4
    assert inlined_size(_nested_model(40), cap=1000) == 1001
    with pytest.raises(FrontendError, match=r"local function 'f0' calls itself \(f0 -> f0\)"):
        inlined_size(_nested_model(3, recursive=True))
    with pytest.raises(FrontendError, match="calls itself"):
        load_onnx(_save(tmp_path, _nested_model(3, recursive=True)))
    g = load_onnx(_save(tmp_path, _nested_model(4), "ok.onnx"))  # small nesting still inlines and counts
    assert sum(1 for op in g.ops() if "Relu" in op.op) == 8


def test_huge_onnx_tensor_warns_once_naming_it(tmp_path):
    import graphroof

    g = h.make_graph([h.make_node("Relu", ["big_input"], ["y"])], "big",
                     [h.make_tensor_value_info("big_input", TensorProto.FLOAT, [2**31, 2**31])],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    p = _save(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graphroof.analyze(p, hw="a100")
    mine = [w for w in caught if issubclass(w.category, GraphroofWarning) and "past any real model" in str(w.message)]
    assert len(mine) == 1 and "'big_input'" in str(mine[0].message) and "4.61e+18 elements" in str(mine[0].message)
    ok = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "ok", [h.make_tensor_value_info("x", TensorProto.FLOAT,
                      [8, 1024])], [h.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphroofWarning)
        graphroof.analyze(_save(tmp_path, h.make_model(ok, opset_imports=[h.make_opsetid("", 17)]), "ok.onnx"))


# -- transformers configs -----------------------------------------------------------------------------------------

def _config(tmp_path, name="config.json", **over) -> str:
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 256,
           "max_position_embeddings": 4096, "torch_dtype": "float16"}
    cfg.update(over)
    d = tmp_path / name.replace(".json", "")
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d / "config.json")


@pytest.mark.parametrize("layers", [-3, 0, 2000, 10**5])
def test_config_layers_outside_plausible_range_is_one_line(tmp_path, capsys, layers):
    p = _config(tmp_path, num_hidden_layers=layers)
    for argv in (["analyze", p], ["llm", p, "--hw", "a100"]):
        assert main(argv) == 1
        line = _one_line_error(1, capsys.readouterr().err)
        assert f"num_hidden_layers = {layers} is outside the plausible range 1..1,000" in line
        assert "GRAPHROOF_MAX_LAYERS" in line


def test_config_of_10_pow_5_layers_fails_fast_in_a_subprocess(tmp_path):
    p = _config(tmp_path, num_hidden_layers=10**5)
    rc, out, err, secs = _cli(["analyze", p], mem_gb=4.0, timeout=120)
    assert "num_hidden_layers = 100000" in _one_line_error(rc, err) and not out
    rc, out, err, secs = _cli(["llm", p, "--hw", "a100"], mem_gb=4.0, timeout=120)
    assert "num_hidden_layers = 100000" in _one_line_error(rc, err) and not out


@pytest.mark.parametrize("field,value,expect", [
    ("hidden_size", 0, "hidden_size = 0 is outside the plausible range 1..1,048,576"),
    ("num_attention_heads", -1, "num_attention_heads = -1 is outside the plausible range 1..16,384"),
    ("vocab_size", 2**40, "vocab_size = 1099511627776 is outside the plausible range 1..16,777,216"),
    ("intermediate_size", "128", "intermediate_size = '128' is not a whole number"),
    ("n_layer", True, "n_layer = True is not a whole number"),
    ("text_config", {"num_hidden_layers": 5000}, "text_config.num_hidden_layers = 5000 is outside"),
])
def test_config_size_fields_have_ranges(field, value, expect):
    with pytest.raises(FrontendError, match=expect.replace("(", r"\(").replace(".", r"\.")):
        check_config_values({"model_type": "llama", field: value}, "cfg.json")


def test_layer_ceiling_override_and_real_configs_pass(monkeypatch):
    from pathlib import Path

    import graphroof.frontends as fe

    check_config_values({"num_hidden_layers": 32, "num_key_value_heads": None, "moe_intermediate_size": 0})
    monkeypatch.setenv("GRAPHROOF_MAX_LAYERS", "5000")
    check_config_values({"num_hidden_layers": 2000})
    with pytest.raises(FrontendError, match=r"1\.\.5,000; fix"):
        check_config_values({"num_hidden_layers": 6000})
    monkeypatch.setenv("GRAPHROOF_MAX_LAYERS", "many")
    with pytest.raises(InputError, match="GRAPHROOF_MAX_LAYERS"):
        check_config_values({"num_hidden_layers": 2})
    monkeypatch.delenv("GRAPHROOF_MAX_LAYERS")
    for f in sorted((Path(fe.__file__).parent / "zoo_configs").glob("*.json")):
        check_config_values(json.loads(f.read_text()), f.name)


def test_architectures_naming_a_non_model_is_one_line(tmp_path, capsys):
    pytest.importorskip("transformers")
    p = _config(tmp_path, architectures=["pipeline"])
    for argv in (["analyze", p], ["llm", p, "--hw", "a100"]):
        assert main(argv) == 1
        line = _one_line_error(1, capsys.readouterr().err)
        assert "architectures[0] = 'pipeline' is not a transformers model class" in line


# -- sweep --------------------------------------------------------------------------------------------------------

def test_check_grid_counts_and_refuses():
    assert check_grid({"--hw": 2, "--batch": 3}) == 6
    with pytest.raises(InputError, match=r"this sweep has 120,000 points \(50 --batch x 40 --prompt x 60 --gen\), "
                                         r"more than 100,000: .*--force"):
        check_grid({"--hw": 1, "--batch": 50, "--prompt": 40, "--gen": 60})
    assert check_grid({"--batch": 50, "--prompt": 40, "--gen": 60}, None) == 120_000


def test_sweep_over_100k_points_is_refused_before_any_trace(tmp_path):
    p = _config(tmp_path)
    lists = {"--batch": ",".join(str(i) for i in range(1, 51)), "--prompt": ",".join(str(16 * i) for i in range(1, 41)),
             "--gen": ",".join(str(2 * i) for i in range(1, 61))}
    out = tmp_path / "grid.csv"
    rc, stdout, err, secs = _cli(["sweep", p, *[x for kv in lists.items() for x in kv], "-f", "csv", "-o", str(out)],
                                 mem_gb=3.0, timeout=120)
    line = _one_line_error(rc, err)
    assert "120,000 points" in line and "--force" in line and not out.exists()


def test_sweep_force_lifts_the_limit(tmp_path, capsys, monkeypatch):
    import graphroof.cli.sweep as cli_sweep

    monkeypatch.setattr(cli_sweep, "MAX_POINTS", 3)
    p = _config(tmp_path)
    argv = ["sweep", p, "--batch", "1,2", "--prompt", "32,64", "--gen", "4", "-f", "csv", "-q"]
    assert main(argv) == 1
    assert "4 points" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert len(rows) == 5


def test_llm_sweep_api_max_points():
    from graphroof.sweeps import sweep

    with pytest.raises(InputError, match="more than 10"):
        sweep("nonexistent-model-never-opened", batch=[1, 2, 3, 4], prompt=[8, 16, 32], max_points=10)
