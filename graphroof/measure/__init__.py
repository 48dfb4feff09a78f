"""Measurements on this machine: ``calibrate`` (the hardware profile of this device: its peaks, bandwidth and
per-op overhead) and measured runs (``graphroof profile``: run a model for real, match runtime ops onto the graph,
compare measured with predicted time).

Words: a *hardware profile* is a device description (:mod:`graphroof.hardware`); a *measured run* is a model
executed and timed here (:mod:`graphroof.measure.run`).  Modules: :mod:`.calibrate` + :mod:`.host_kernels`
(device figures), :mod:`.model` (predict, run, compare), :mod:`.run_torch` / :mod:`.run_onnx` (the runners),
:mod:`.match` (runtime ops -> graph nodes), :mod:`.run` (the measured-run result), :mod:`.hygiene` (load, spread and
thread-count checks of both).
"""

from .model import check_measure_device, measure_model
from .run import Measured, MeasuredComparison

__all__ = ["measure_model", "check_measure_device", "Measured", "MeasuredComparison"]
