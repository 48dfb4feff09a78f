"""The ONNX frontend: an ``.onnx`` file -> :class:`~graphroof.graph.OpGraph` (:mod:`.load`), with shape inference in
a guarded child process (:mod:`.shapes`, :mod:`.guard`), and ONNX decoders as LLM sources (:mod:`.source`).  The
package itself does not import onnx.
"""

from .source import has_past_inputs, input_names

__all__ = ["has_past_inputs", "input_names"]
