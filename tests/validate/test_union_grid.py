"""validate prices each model's rows on one grid (the union of its rows' points): a point's figures must not
depend on which other points the engine priced with it (graphroof.validate.llmrows.Batch.run, torchgpu._price_llm)."""

from __future__ import annotations

import numpy as np

from graphroof.hardware import load_hardware
from graphroof.llm.engine import Engine, Pricing
from graphroof.llm.estimate import open_source


def test_a_point_prices_the_same_alone_and_among_the_union():
    hw = load_hardware("h100")
    src = open_source("gpt2")
    pts = [(1, 128, 2), (8, 700, 2), (32, 300, 50)]
    together = Engine(src, hw=hw, pricing=Pricing()).price(*(np.array(c) for c in zip(*pts)))
    for i, (b, p, g) in enumerate(pts):
        alone = Engine(src, hw=hw, pricing=Pricing()).price([b], [p], [g])
        for fig in ("ttft_s", "tpot_s", "e2e_s"):
            a, t = float(getattr(alone, fig)[0]), float(getattr(together, fig)[i])
            assert abs(a - t) <= 1e-9 * abs(a), (fig, (b, p, g), a, t)
