"""Hypothesis fuzzing of the ONNX frontend: mutated valid models (bytes, attributes, dims, dtypes, names,
nesting, op types) give a result or a one-line graphroof error, never another exception, a hang or a crash
(a crash or hang of native shape inference is caught by the guard's child process and is a graphroof error).
Bounded to ~60 s; ``benchmarks/fuzz_onnx.py`` runs longer."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.frontends._fuzz_onnx import check, mutate, seeds  # noqa: E402

SEEDS = seeds()


@settings(max_examples=600, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_models_give_a_result_or_a_graphroof_error(data, tmp_path):
    seed = SEEDS[data.draw(st.integers(0, len(SEEDS) - 1), label="seed")]
    blob = mutate(seed, lambda label, n: data.draw(st.integers(0, max(n - 1, 0)), label=label))
    check(blob, tmp_path)
