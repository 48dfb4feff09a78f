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


class _Eng:
    """An engine stand-in: records the points it is asked to price; figures = 1000 b + p + g / 1000."""

    def __init__(self, windows=None, vendor="nvidia"):
        from types import SimpleNamespace

        self.source = SimpleNamespace(spec=SimpleNamespace(windows=windows, state_layers=None))
        self.spec, self.layout = None, SimpleNamespace(plain=True)
        self.hw = SimpleNamespace(vendor=vendor)
        self.asked: list = []

    def price(self, b, p, g):
        from types import SimpleNamespace

        self.asked.append(list(zip(b, p, g)))
        return SimpleNamespace(val=[1000 * x + y + z / 1000 for x, y, z in zip(b, p, g)])


class _Ctx:
    holdout = None

    def __init__(self, engines):
        self.engines = engines

    def engine(self, model, prof, pricing, dtype=None):
        return self.engines[(model, prof)]

    def holdout_hw(self, prof, dataset, model=""):
        return None


def _row(i):
    from graphroof.validate.result import Row

    return Row("t", f"r:{i}", "e", "gpu", "", "m", "", "tpot", "", "", "", {}, 1.0)


def test_engines_of_a_model_price_its_union_and_a_windowed_one_its_own_points():
    from graphroof.llm.poly import poly_ok
    from graphroof.validate.context import shares_grid
    from graphroof.validate.llmrows import Batch

    plain, windowed, other = _Eng(), _Eng(windows=(4096, None)), _Eng()
    assert shares_grid(plain) and poly_ok(plain.source) and not shares_grid(windowed)
    batch, rows = Batch(), [_row(i) for i in range(5)]
    val = lambda f, i: f.val[i]  # noqa: E731
    batch.add(("m", "a", None, "bf16"), rows[0], 1, 128, 2, val)
    batch.add(("m", "a", None, "bf16"), rows[1], 8, 512, 2, val)
    batch.add(("m", "b", None, "bf16"), rows[2], 4, 1000, 20, val)   # another device of the same model: priced on the union
    batch.add(("m", "c", None, "bf16"), rows[3], 2, 64, 2, val)      # windowed: its own point only
    batch.add(("n", "a", None, "bf16"), rows[4], 1, 128, 2, val)     # another model: its own union
    batch.run(_Ctx({("m", "a"): plain, ("m", "b"): other, ("m", "c"): windowed, ("n", "a"): _Eng()}), "t")
    union = [(1, 128, 2), (8, 512, 2), (4, 1000, 20), (2, 64, 2)]
    assert plain.asked == [union] and other.asked == [union]
    assert windowed.asked == [[(2, 64, 2)]]
    assert [r.predicted for r in rows] == [1000 + 128 + 0.002, 8000 + 512 + 0.002, 4000 + 1000 + 0.02,
                                           2000 + 64 + 0.002, 1000 + 128 + 0.002]
