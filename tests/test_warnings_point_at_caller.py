"""Warnings are attributed to the caller's line, not to graphroof's own code."""

from __future__ import annotations

import warnings

import graphroof
from graphroof.graph import OpGraph, OpNode, TensorSpec


def test_unknown_op_warning_points_at_the_callers_line():
    g = OpGraph("x")
    g.add_op(OpNode("a", "custom.Foo", (TensorSpec((4,), "fp32"),), (TensorSpec((4,), "fp32"),)), ["x"], ["y"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graphroof.analyze(g, hw="a100")  # the warning must name this file
    assert caught and all(w.filename == __file__ for w in caught), [(w.filename, w.lineno) for w in caught]
