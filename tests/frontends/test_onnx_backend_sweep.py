"""Every ONNX backend node test (generated with the installed onnx) and every model graph shipped in the onnx
wheel analyses: no traceback, no hang, an unbound-dim error only where an input's shape is symbolic or an
input's *value* decides a size (and then the message names that input), every unknown op warned once.

The guard's child process is switched off here for speed (1,900 forks cost ~60 s on a loaded 2-core VM); a
per-model alarm catches hangs.  The guard itself is tested in ``test_onnx_hostile.py``.
"""

from __future__ import annotations

import glob
import os
import re
import signal
import warnings
from collections import Counter
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")

import graphroof  # noqa: E402
from graphroof.errors import GraphroofError, GraphroofWarning, UnboundDimError  # noqa: E402

_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"


def _inputs_static(path: str) -> bool:
    m = onnx.load(path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        t = vi.type
        while t.HasField("sequence_type") or t.HasField("optional_type"):
            t = t.sequence_type.elem_type if t.HasField("sequence_type") else t.optional_type.elem_type
        if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape") \
                or any(not d.HasField("dim_value") for d in t.tensor_type.shape.dim):
            return False
    return True


@pytest.fixture(scope="module")
def node_models(tmp_path_factory) -> list[str]:
    from onnx.backend.test.case import node as node_cases

    out = tmp_path_factory.mktemp("onnx_node")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node_cases.collect_testcases(None)
    paths = []
    for c in cases:
        p = out / f"{c.name}.onnx"
        p.write_bytes(c.model.SerializeToString())
        paths.append(str(p))
    return paths


class _Hang(Exception):
    pass


def _alarm(*_):
    raise _Hang()


def _sweep(paths: list[str]) -> tuple[Counter, list[str]]:
    res: Counter = Counter()
    bad: list[str] = []
    old = signal.signal(signal.SIGALRM, _alarm)
    os.environ["GRAPHROOF_ONNX_GUARD"] = "0"
    try:
        for p in paths:
            signal.alarm(30)
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    graphroof.analyze(p, hw="a100")
                res["ok"] += 1
                per_key = Counter(str(w.message).split("'")[1] for w in caught
                                  if issubclass(w.category, GraphroofWarning) and str(w.message).startswith("no rule"))
                if any(v != 1 for v in per_key.values()):
                    bad.append(f"{p}: unknown op warned more than once: {per_key}")
            except UnboundDimError as e:
                res["unbound"] += 1
                msg = str(e)
                if _inputs_static(p) and "depends on the value of model input" not in msg:
                    bad.append(f"{p}: unbound dim on a static-input model: {msg}")
                if not re.match(r"^.+ \([\w.]+\): dimension ", msg):
                    bad.append(f"{p}: error does not name the op: {msg}")
            except GraphroofError as e:
                res[type(e).__name__] += 1
                if "\n" in str(e):
                    bad.append(f"{p}: multi-line error: {e!r}")
            except _Hang:
                bad.append(f"{p}: no result within 30 s")
            except Exception as e:  # noqa: BLE001 - what the test is looking for
                bad.append(f"{p}: {type(e).__name__}: {e}")
            finally:
                signal.alarm(0)
    finally:
        signal.signal(signal.SIGALRM, old)
        os.environ.pop("GRAPHROOF_ONNX_GUARD", None)
    return res, bad


def test_every_node_test_model_analyses(node_models):
    res, bad = _sweep(node_models)
    assert not bad, "\n".join(bad[:20])
    assert len(node_models) > 1500 and res["ok"] > 0.97 * len(node_models), res


def test_every_model_graph_in_the_wheel_analyses():
    paths = sorted(glob.glob(str(_DATA / "light" / "*.onnx")))
    for d in ("pytorch-converted", "pytorch-operator", "simple", "node"):
        paths += sorted(glob.glob(str(_DATA / d / "*" / "model.onnx")))
    assert len(paths) > 100
    res, bad = _sweep(paths)
    assert not bad, "\n".join(bad[:20])
    assert res["ok"] >= len(paths) - 3, res  # 3 sequence models whose sizes come from input values / symbols
