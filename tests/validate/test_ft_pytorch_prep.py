"""The FasterTransformer PyTorch op's wrapper ops before its first kernel (graphroof.validate.vision._prep_ops,
_host_runtime): NVIDIA/FasterTransformer@0280a66 sample/pytorch/utils/encoder.py#L188-L198 runs 9 ATen ops that
launch work per forward (two blocking host-to-device copies among them) before the first layer, priced as host time before the
first kernel at the pytorch-eager preset's dispatch cost, as PyTorch 1.8 on the FT docs' host (PYTORCH18_HOST)."""

from __future__ import annotations

import pytest

from graphroof.fuse.runtimes import get_runtime
from graphroof.validate.vision import FT_PYTORCH_PREP_OPS, PYTORCH18_HOST, _host_runtime, _prep_ops


def test_only_the_ft_docs_pytorch_op_rows_run_the_wrapper():
    assert FT_PYTORCH_PREP_OPS == 9
    assert _prep_ops("FT_BERT_PYTORCH", "FasterTransformer PyTorch custom extension [FT]") == 9
    assert _prep_ops("FT_BERT_TENSORFLOW", "FasterTransformer TF custom op [FT]") == 0  # offsets are an input tensor
    assert _prep_ops("FT_BERT_PYTORCH", "PyTorch TorchScript [PyT]") == 0
    assert _prep_ops("TRT_DEMO_BERT", "TensorRT 7.2.3.4") == 0


def test_wrapper_ops_are_host_time_before_the_first_kernel():
    eager, ft = get_runtime("pytorch-eager"), get_runtime("fastertransformer")
    assert (eager.host_overhead_per_kernel_s, ft.host_overhead_per_kernel_s) == (9e-6, 8.5e-6)
    assert PYTORCH18_HOST == 1.20
    # V100 host (factor 1), launch 5 us, PyTorch 1.8 ops: 9 ops x 1.20 x (5 + 9) us = 151.2 us before the first
    # kernel; the per-kernel host cost of the FT preset is left as it is
    rt = _host_runtime("fastertransformer", 1.0, 5e-6, 9)
    assert rt.call_overhead_s == pytest.approx(151.2e-6)
    assert rt.host_overhead_per_kernel_s == pytest.approx(8.5e-6)
    # A10 host (factor 0.603): 0.603 x 151.2 = 91.1736 us; per kernel 0.603 x (5 + 8.5) - 5 = 3.1405 us
    rt = _host_runtime("fastertransformer", 0.603, 5e-6, 9)
    assert rt.call_overhead_s == pytest.approx(91.1736e-6)
    assert rt.host_overhead_per_kernel_s == pytest.approx(3.1405e-6)
    # nothing to add: the preset by name, as before
    assert _host_runtime("fastertransformer", 1.0, 5e-6, 0) == "fastertransformer"
