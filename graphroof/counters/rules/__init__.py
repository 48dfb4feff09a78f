"""Built-in rules, one module per op family; each registers its table (ATen and ONNX keys) on import.

matmul, conv, detection (torchvision's roi / nms ops), attention, norm, elementwise, reduce, movement,
recurrent, quant, spectral: :mod:`..family` tables.
comm (tensor-parallel collectives), kvcache (``kv_cache.append``), ssm (whole state-space scans) and table
(op-table rows): graphroof's own op keys, registered with ``@register_rule``.
"""

from . import (  # noqa: F401
    attention,
    comm,
    conv,
    detection,
    elementwise,
    kvcache,
    matmul,
    movement,
    norm,
    quant,
    quantized_torch,
    recurrent,
    reduce,
    spectral,
    ssm,
    table,
)
