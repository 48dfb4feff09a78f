"""The CLI runs a command under its collector thresholds (graphroof.cli.GC_THRESHOLD) and restores the caller's."""

from __future__ import annotations

import gc

import graphroof.cli as cli


def test_command_runs_under_cli_thresholds_and_restores(monkeypatch):
    seen = []
    mod = cli.COMMANDS["hw"]
    monkeypatch.setattr(mod, "run", lambda args: seen.append(gc.get_threshold()) or 0)
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # Python's defaults: every threshold is raised to the CLI's
    try:
        assert cli.main(["hw", "list"]) == 0
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(50_000, 5, 5_000)  # a caller's higher threshold is kept, the others raised
        assert cli.main(["hw", "list"]) == 0
    finally:
        gc.set_threshold(*before)
    assert seen[0] == cli.GC_THRESHOLD
    assert seen[1] == (50_000, cli.GC_THRESHOLD[1], 5_000)
