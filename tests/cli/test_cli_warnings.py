"""Issue 27 (D1): the CLI prints graphroof's warnings, never third-party deprecation notices raised during capture."""

from __future__ import annotations

import sys
import textwrap

import pytest

from graphroof.cli import hw as hw_cmd
from graphroof.cli import main

NOISY = textwrap.dedent("""
    import warnings

    def noisy():
        warnings.warn("`foo` is deprecated and will be removed in v9", FutureWarning)
        warnings.warn("old API", DeprecationWarning)
        warnings.warn("pending", PendingDeprecationWarning)
        warnings.warn("torch_dtype is deprecated, use dtype", UserWarning)
""")


@pytest.fixture
def fakelib(tmp_path, monkeypatch):
    """A third-party module (outside graphroof) that raises deprecation warnings, as transformers does."""
    (tmp_path / "fakethirdparty_d1.py").write_text(NOISY)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    yield importlib.import_module("fakethirdparty_d1")
    sys.modules.pop("fakethirdparty_d1", None)


def test_third_party_warnings_during_a_factory_capture_are_not_printed(tmp_path, fakelib, capsys):
    """A model factory that calls third-party code warning FutureWarning etc.: stderr stays clean, while
    graphroof's own warning (an implausible --mem-bw) still shows."""
    (tmp_path / "factory_d1.py").write_text(textwrap.dedent("""
        import torch
        import fakethirdparty_d1

        def build():
            fakethirdparty_d1.noisy()
            return torch.nn.Linear(8, 8), (torch.empty(2, 8),)
    """))
    code = main(["analyze", f"{tmp_path / 'factory_d1.py'}:build", "--mem-bw", "1MB/s", "-f", "json",
                 "-o", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == 0
    assert "deprecated" not in err and "old API" not in err and "pending" not in err
    assert "graphroof: warning: --mem-bw 1.00 MB/s is outside the plausible range" in err


def test_third_party_warnings_replayed_by_the_store_are_not_printed(fakelib, monkeypatch, capsys):
    """The store's capture re-raises non-graphroof warnings with warn_explicit (no registry: every replay
    printed, 7 copies in `llm` of a transformers model); they stay hidden, a GraphroofWarning shows once."""
    from graphroof.errors import GraphroofWarning
    from graphroof.frontends import trace_store

    def traced():
        fakelib.noisy()
        import warnings

        warnings.warn("2 ops without a counting rule", GraphroofWarning, stacklevel=2)
        return 1

    def fake_run(args):
        for _ in range(7):
            trace_store.capture(None, "part", traced)
        return 0

    monkeypatch.setattr(hw_cmd, "run", fake_run)
    assert main(["hw", "list"]) == 0
    err = capsys.readouterr().err
    assert "deprecated" not in err and "old API" not in err and "pending" not in err
    assert err.count("graphroof: warning: 2 ops without a counting rule") == 7


def test_warnings_from_graphroof_modules_still_show(monkeypatch, capsys):
    """A plain UserWarning raised from graphroof's own code is ours: shown."""
    from graphroof.cli import _ours
    from graphroof.frontends import trace_store

    assert _ours(UserWarning, trace_store.__file__)
    assert not _ours(FutureWarning, "/site-packages/transformers/modeling_utils.py")
    assert not _ours(UserWarning, "<string>")
