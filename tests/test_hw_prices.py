"""List prices in hardware profiles ([price]: usd_per_hour with source and date): validation, `hw show`, and
`sweep` pricing points from the profile unless --usd-per-hour is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphroof.cli import main
from graphroof.errors import HardwareProfileError
from graphroof.hardware import load_hardware, profile_from_dict

BASE = {"name": "dev", "matrix_peak_flops_per_s": {"bf16": 100e12}, "memory": {"bw_bytes_per_s": 1e12}}


def test_price_table_is_validated():
    p = profile_from_dict({**BASE, "price": {"usd_per_hour": 2.5, "source": "a vendor page", "date": "2026-05"}},
                          Path("dev.toml"))
    assert (p.usd_per_hour, p.price_source, p.price_date) == (2.5, "a vendor page", "2026-05")
    assert p.as_dict()["price"] == {"usd_per_hour": 2.5, "source": "a vendor page", "date": "2026-05"}
    assert profile_from_dict(BASE, Path("dev.toml")).usd_per_hour is None
    for bad, msg in (({"usd_per_hour": 2.5, "date": "2026"}, "price.source"),
                     ({"usd_per_hour": 2.5, "source": "x"}, "price.date"),
                     ({"usd_per_hour": -1, "source": "x", "date": "2026"}, "price.usd_per_hour"),
                     ({"usd_per_hour": 1, "source": "x", "date": "2026", "eur": 1}, "price.eur"),
                     ("cheap", "price must be a table")):
        with pytest.raises(HardwareProfileError, match=msg):
            profile_from_dict({**BASE, "price": bad}, Path("dev.toml"))


def test_shipped_prices_have_sources_and_dates():
    priced = [n for n in ("a100", "h100", "mi300x") if load_hardware(n).usd_per_hour]
    assert priced == ["a100", "h100", "mi300x"]
    for n in priced:
        p = load_hardware(n)
        assert 0.5 < p.usd_per_hour < 20 and len(p.price_source) > 20 and p.price_date[:4].isdigit()


def test_hw_show_prints_the_price(capsys):
    assert main(["hw", "show", "h100"]) == 0
    out = capsys.readouterr().out
    assert "list price: $3.78 per GPU-hour" in out and "2026-05-07" in out


def test_sweep_prices_points_from_the_profile_unless_given():
    from graphroof.sweeps import sweep
    from tests.llm.toy import RULES, toy_source

    r = sweep(toy_source(), hw=["a100", "h100", "l4"], batch=[1], prompt=[16], gen=[4], rules=RULES)
    by = {p.hw: p for p in r.points}
    assert by["a100-80gb-sxm"].usd_per_hour == 1.49 and by["h100-sxm"].usd_per_hour == 3.78
    assert by["l4-24gb-pcie"].usd_per_hour is None  # no list price in that profile
    assert any("list prices" in n and "1.49" in n for n in r.notes)
    # $/Mtok = price * tp / 3600 / tokens_per_s * 1e6
    p = by["h100-sxm"]
    assert p.usd_per_million_tokens == pytest.approx(3.78 / 3600 / p.tokens_per_s * 1e6)
    r2 = sweep(toy_source(), hw=["a100"], batch=[1], prompt=[16], gen=[4], rules=RULES, usd_per_hour={"a100": 2.0})
    assert r2.points[0].usd_per_hour == 2.0 and not any("list prices" in n for n in r2.notes)
