"""Built-in rules.  Each module registers its rules with ``@register_rule`` on import."""

from . import table  # noqa: F401
from . import onnx_attention, onnx_elementwise, onnx_matmul, onnx_movement, onnx_norm_reduce  # noqa: F401
from . import comm  # noqa: F401
from . import kvcache  # noqa: F401
from . import aten_attention, aten_conv, aten_elementwise, aten_matmul, aten_movement, aten_norm, aten_reduce  # noqa: F401,E401
