from __future__ import annotations

import pytest

from graphroof import InputError, OpGraph, UnboundDimError, bind
from graphroof.dtypes import canonical_dtype
from graphroof.graph import resolve_dim
from graphroof.units import fmt_si, fmt_time, parse_quantity
from tests.conftest import T, node


@pytest.mark.parametrize("text,value", [
    ("57.8M", 57.8e6), ("25MB", 25e6), ("1.2 GFLOP", 1.2e9), ("96GB/s", 96e9), ("4.6T", 4.6e12),
    ("4608e9", 4608e9), ("1.5 TB/s", 1.5e12), ("2GiB", 2 * 2**30), ("312 TFLOP/s", 312e12), ("0", 0.0),
    ("1,000", 1000.0), (17, 17.0), ("3k", 3000.0),
])
def test_parse_quantity(text, value):
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("bad", ["", "fast", "12 parsecs", "1.2.3", "5mB", "nan", "inf"])
def test_parse_quantity_rejects(bad):
    with pytest.raises(InputError, match="cannot parse|milli"):
        parse_quantity(bad)


def test_formatting():
    assert fmt_si(2.5e12, "FLOP/s") == "2.50 TFLOP/s"
    assert fmt_time(0.0453) == "45.3 ms" and fmt_time(2e-6) == "2 us" and fmt_time(0) == "0 s"


def test_dtype_aliases():
    assert canonical_dtype("torch.bfloat16") == "bf16"
    assert canonical_dtype("FLOAT16") == "fp16"
    assert canonical_dtype("float8_e4m3fn") == "fp8_e4m3"
    with pytest.raises(InputError, match="unknown dtype 'fp7'"):
        canonical_dtype("fp7")


def test_symbolic_dims_bind_and_error():
    assert resolve_dim("past + 1", {"past": 7}) == 8
    assert resolve_dim("2*seq", {"seq": 3}) == 6
    g = OpGraph("g")
    g.add_op(node("x", [T("fp16", "batch", "seq")], [T("fp16", "batch", "seq + past")], name="a"), outputs=["t"])
    g.add_op(node("y", [T("fp16", 1)], [T("fp16", 1)], name="b"), inputs=["t"])
    assert g.symbolic_dims() == {"batch", "seq", "past"}
    assert list(g.nx.edges(data="tensor")) == [("a", "b", "t")]
    b = bind(g, {"batch": 2, "seq": 3, "past": 4})
    assert b.node("a").outputs[0].shape == (2, 7) and b.meta["dims"] == {"batch": 2, "seq": 3, "past": 4}
    with pytest.raises(UnboundDimError, match="'past' is unbound.*--dim NAME=VALUE"):
        bind(g, {"batch": 2, "seq": 3})
    with pytest.raises(UnboundDimError, match="'seq'"):
        T("fp16", "seq").numel


def test_duplicate_op_name():
    g = OpGraph()
    g.add_op(node("x", name="a"))
    with pytest.raises(ValueError, match="duplicate op name"):
        g.add_op(node("x", name="a"))
