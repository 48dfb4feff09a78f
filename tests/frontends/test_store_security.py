"""The trace store cannot be poisoned: nothing it reads runs code, a planted / altered / linked entry is a miss, a
store folder that is not this user's own and private turns it off (one warning), and its walks never leave it."""

from __future__ import annotations

import os
import pickle
import stat
import subprocess
import sys
import time
import warnings
import zlib
from pathlib import Path

import pytest

from graphroof.errors import GraphroofWarning, InputError
from graphroof.frontends import store_codec, store_files, store_walk, trace_store
from graphroof.graph import OpGraph, OpNode, Role, TensorSpec


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHROOF_CACHE", "on")
    monkeypatch.setenv("GRAPHROOF_CACHE_DIR", str(tmp_path / "store"))
    monkeypatch.delenv("GRAPHROOF_CACHE_MB", raising=False)
    return tmp_path / "store"


def _key(n: int = 0) -> str:
    k = trace_store.key_of("test", {"n": n})
    assert k is not None
    return k


def _entry_path(root: Path, key: str, part: str) -> Path:
    """The path the store reads *part* of *key* from (computable only with the user's key file)."""
    l1, l2 = store_files.entry_dir((root / store_files.KEY_FILE).read_bytes(), key)
    return root / l1 / l2 / f"{part}.json.z"


class _Marker:
    """Unpickling this creates the marker file: what an attacker's planted pickle would do."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def _collect(fn):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(w.message) for w in rec if issubclass(w.category, GraphroofWarning)]


def test_a_planted_pickle_is_a_miss_and_runs_nothing(store, tmp_path):
    key = _key()
    trace_store.store(key, "graph", {"a": 1})
    marker = tmp_path / "ran"
    for payload in (pickle.dumps(_Marker(marker)), zlib.compress(pickle.dumps(_Marker(marker)))):
        p = _entry_path(store, key, "graph")
        p.write_bytes(payload)
        assert trace_store.load(key, "graph") is None
        assert not marker.exists() and not p.exists()      # a miss, removed
    # sealed with the right header but a MAC made without the key: still a miss
    p.write_bytes(store_files.MAGIC + b"\0" * 32 + zlib.compress(pickle.dumps(_Marker(marker))))
    assert trace_store.load(key, "graph") is None and not marker.exists()


def test_an_altered_entry_is_a_miss(store):
    key = _key()
    trace_store.store(key, "graph", list(range(100)))
    p = _entry_path(store, key, "graph")
    good = p.read_bytes()
    for i in (0, len(store_files.MAGIC) + 3, len(good) - 1):
        bad = bytearray(good)
        bad[i] ^= 1
        p.write_bytes(bytes(bad))
        assert trace_store.load(key, "graph") is None
    p.write_bytes(good)
    assert trace_store.load(key, "graph") == list(range(100))
    # an entry copied to another key or part does not verify either
    other = _key(1)
    trace_store.store(other, "graph", "x")
    _entry_path(store, other, "graph").write_bytes(good)
    assert trace_store.load(other, "graph") is None


def test_the_entry_path_depends_on_the_users_key(store, tmp_path, monkeypatch):
    key = _key()
    trace_store.store(key, "graph", 1)
    first = _entry_path(store, key, "graph")
    monkeypatch.setenv("GRAPHROOF_CACHE_DIR", str(tmp_path / "other"))
    trace_store.store(key, "graph", 1)
    assert _entry_path(tmp_path / "other", key, "graph").relative_to(tmp_path / "other") != \
        first.relative_to(store)
    assert key not in str(first)
    k = store / store_files.KEY_FILE
    assert stat.S_IMODE(k.stat().st_mode) == 0o600
    for d in (store, first.parent, first.parent.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700


def test_store_folders_are_private_under_any_umask(store):
    old = os.umask(0)
    try:
        trace_store.store(_key(), "graph", 1)
    finally:
        os.umask(old)
    for p in [store, *store.rglob("*")]:
        assert stat.S_IMODE(p.stat().st_mode) in (0o700, 0o600), p


@pytest.mark.parametrize("how", ["group-writable root", "other-writable level", "root owned by another uid",
                                 "level owned by another uid", "key readable by others"])
def test_a_store_that_is_not_private_is_off_with_one_warning(store, how):
    key = _key()
    trace_store.store(key, "graph", 1)
    p = _entry_path(store, key, "graph")
    if how == "group-writable root":
        store.chmod(0o770)
    elif how == "other-writable level":
        p.parent.parent.chmod(0o707)
    elif how == "key readable by others":
        (store / store_files.KEY_FILE).chmod(0o644)
    elif os.geteuid() == 0:   # the tests run as root: a real chown
        os.chown(store if how.startswith("root") else p.parent, 65534, -1)
    else:
        pytest.skip("changing a folder's owner needs root")
    out, warned = _collect(lambda: [trace_store.load(key, "graph"), trace_store.store(key, "graph", 2),
                                    trace_store.load(key, "graph")])
    assert out == [None, None, None]
    assert len(warned) == 1 and "store of traced graphs is off" in warned[0], warned
    if "level" in how:   # clear skips the folder it may not trust
        trace_store.clear()
    else:
        with pytest.raises(InputError, match="not clearing"):
            trace_store.clear()
    assert p.exists()


def test_ownership_is_checked_against_the_effective_uid(store, monkeypatch):
    trace_store.store(_key(), "graph", 1)
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(store).st_uid + 1)
    out, warned = _collect(lambda: trace_store.load(_key(), "graph"))
    assert out is None and len(warned) == 1 and "not by you" in warned[0]


def test_a_symlinked_entry_is_not_followed(store, tmp_path):
    key = _key()
    trace_store.store(key, "graph", "mine")
    p = _entry_path(store, key, "graph")
    target = tmp_path / "elsewhere.json.z"
    target.write_bytes(p.read_bytes())          # a valid entry, reached through a link
    p.unlink()
    p.symlink_to(target)
    assert trace_store.load(key, "graph") is None
    trace_store.store(key, "graph", "new")       # replaces the link, never writes through it
    assert not p.is_symlink() and target.read_bytes() != p.read_bytes()
    assert trace_store.load(key, "graph") == "new"
    # a linked entry folder: refused (a link where a folder belongs), nothing read through it
    p.unlink()
    p.parent.rmdir()
    outside = tmp_path / "outside-entry"
    outside.mkdir(mode=0o700)
    p.parent.symlink_to(outside)
    out, warned = _collect(lambda: trace_store.load(key, "graph"))
    assert out is None and len(warned) == 1 and "symbolic link" in warned[0]


def _outside_tree(tmp_path: Path) -> list[Path]:
    """Files and folders of the store's shape outside it, reached through links inside it."""
    made = []
    out = tmp_path / "outside"
    for l2 in ("ab" + "1" * 38, "cd" + "2" * 38):
        d = out / l2[:2] / l2
        d.mkdir(parents=True, mode=0o700)
        for name in ("graph.json.z", "graph.pkl.z", ".tmp-x"):
            (d / name).write_bytes(b"precious")
            made.append(d / name)
    (out / "lone").mkdir()
    (out / "lone" / "graph.json.z").write_bytes(b"precious")
    made.append(out / "lone" / "graph.json.z")
    return made


@pytest.mark.parametrize("walk", ["clear", "prune"])
def test_clear_and_prune_never_leave_the_store(store, tmp_path, monkeypatch, walk):
    trace_store.store(_key(), "graph", 1)
    # the real entry's level-1 folder comes from the per-user random key: pick the planted names around it
    level = next(p for p in store.iterdir() if p.is_dir())
    taken = {store_files.entry_dir((store / store_files.KEY_FILE).read_bytes(), _key(n))[0] for n in (0, 1)}
    linked, planted = [n for n in ("ab", "ef", "a1", "e2", "c3", "d4") if n not in taken][:2]
    made = _outside_tree(tmp_path)
    out = tmp_path / "outside"
    (store / linked).symlink_to(out / "ab")                    # a linked level-1 folder
    (store / planted).mkdir(mode=0o700)
    (store / planted / (planted + "3" * 38)).symlink_to(out / "cd" / ("cd" + "2" * 38))   # a linked entry folder
    (level / level.name).mkdir(mode=0o700)                     # not of the store's shape: left alone
    (level / level.name / "graph.json.z").write_bytes(b"not ours")
    (store / planted / (planted + "4" * 38)).mkdir(mode=0o700)
    (store / planted / (planted + "4" * 38) / "graph.pkl.z").symlink_to(out / "lone" / "graph.json.z")
    if walk == "clear":
        trace_store.clear()
    else:
        (store / store_files.USAGE_FILE).unlink()          # no estimate: the next write scans
        size = trace_store.usage()[2]
        monkeypatch.setenv("GRAPHROOF_CACHE_MB", str(1.5 * size / 1e6))  # room for one small entry
        trace_store.store(_key(1), "graph", 2)
        assert trace_store.load(_key(), "graph") is None and trace_store.load(_key(1), "graph") == 2
    assert all(p.read_bytes() == b"precious" for p in made)
    assert (level / level.name / "graph.json.z").exists()


def test_clear_of_a_folder_that_is_not_a_store_touches_only_names_of_its_shape(tmp_path, monkeypatch):
    home = tmp_path / "home"
    for d in ("x/y", "ab/" + "ab" * 20, "p/q/r", "cd/" + "cd" * 20):
        (home / d).mkdir(parents=True)
    home.chmod(0o700)
    (home / "notes.pkl.z").write_bytes(b"keep")
    (home / "cd" / ("cd" * 20) / "notes.txt").write_bytes(b"keep")
    (home / "cd" / ("cd" * 20) / "graph.pkl.z").write_bytes(b"an old-format entry")
    monkeypatch.setenv("GRAPHROOF_CACHE_DIR", str(home))
    assert trace_store.clear() == 1
    assert (home / "x" / "y").is_dir() and (home / "p" / "q" / "r").is_dir() and (home / "notes.pkl.z").exists()
    assert (home / "cd" / ("cd" * 20) / "notes.txt").exists()
    assert not (home / "ab").exists()    # an empty entry folder (of the store's own shape) goes
    assert not (home / store_files.KEY_FILE).exists()    # nothing is created by clear


def test_a_wrong_type_entry_is_a_miss_not_a_crash(store):
    entry = trace_store.Entry("test", {"n": 3})
    entry.put("graph", ({"cls": "HFSource"}, []))        # sealed by us, but not a graph
    calls = []

    def trace():
        calls.append(1)
        return OpGraph("fresh")

    g = trace_store.capture(entry, "graph", trace, expect=OpGraph)
    assert isinstance(g, OpGraph) and calls == [1]
    assert isinstance(trace_store.capture(entry, "graph", trace, expect=OpGraph), OpGraph) and calls == [1]
    entry.put("graph", (OpGraph("g"), [("not a class", 1)]))   # malformed warnings: a miss too
    trace_store.capture(entry, "graph", trace, expect=OpGraph)
    assert calls == [1, 1]


def test_a_stored_graph_where_a_manifest_belongs_is_a_miss(store):
    from graphroof.frontends import ModelRef, Resolved, stored

    built = []

    class Fake:
        pass

    def make():
        built.append(1)
        return Fake()

    res = Resolved(ModelRef("zoo", "x"), config={"x": 1}, name="x", source="zoo:x")
    entry = trace_store.Entry("llm", stored.request(res, {}))
    entry.put("manifest", (OpGraph("g"), []))
    assert isinstance(stored.open_stored(res, {}, make), Fake) and built == [1]
    assert entry.get("manifest") is None    # dropped


def test_unknown_types_are_not_stored(store):
    class Foreign:
        pass

    trace_store.store(_key(), "graph", {"x": Foreign()})
    trace_store.store(_key(1), "graph", ("a", Role.WEIGHT))
    assert trace_store.load(_key(), "graph") is None
    assert trace_store.load(_key(1), "graph") == ("a", Role.WEIGHT)
    with pytest.raises(store_codec.CodecError):
        store_codec.dumps(type("S", (str,), {})("a str subclass"))
    for bad in (b"[\"?\"]", b"[\"G\", 1]", b"{\"a\": [1]}", b"[\"W\", \"os:system\"]", b"[\"M\", {\"zzz\": 1}]"):
        with pytest.raises(store_codec.CodecError):
            store_codec.loads(bad)


def test_codec_round_trips_graph_structure_exactly():
    t1 = TensorSpec((1, "seq", 64), "bf16", Role.ACTIVATION)
    w = TensorSpec((64, 64), "bf16", Role.WEIGHT)
    g = OpGraph("m", meta={"dims": {"seq": 8}, "notes": ["n"], "t": (1, 2.5, float("inf"), None, True)})
    g.add_op(OpNode("a", "aten.mm", (t1, w), (t1,), {"k": [1, (2, 3)], 4: {5}}, "model.l0"), ["x", "w"], ["y"])
    g.add_op(OpNode("b", "aten.relu", (t1,), (t1,)), ["x"], ["z"])
    g.add_op(OpNode("c", "aten.add", (t1, t1, None), (t1,)), ["z", "y"], ["o"])   # inputs out of producer order
    back = store_codec.loads(store_codec.dumps(g))
    assert list(back.nx.nodes) == list(g.nx.nodes) and back.meta == g.meta and back._producer == g._producer
    for n in g.nx.nodes:
        assert back.nx.nodes[n] == g.nx.nodes[n]
        assert list(back.nx.pred[n]) == list(g.nx.pred[n]) and list(back.nx.succ[n]) == list(g.nx.succ[n])
    assert list(back.nx.edges(data=True)) == list(g.nx.edges(data=True))
    assert type(back.node("a").attrs[4]) is set and back.node("c").inputs[2] is None


def test_temp_files_are_counted_pruned_when_stale_and_cleared(store, monkeypatch):
    trace_store.store(_key(), "graph", "x")
    d = next(store.glob("*/*"))
    fresh, stale = d / ".tmp-fresh", d / ".tmp-killed"
    fresh.write_bytes(b"f" * 100)
    stale.write_bytes(b"s" * 100)
    os.utime(stale, (time.time() - 7200,) * 2)
    u = trace_store.usage()
    assert u.temp == 2 and u[1] == 3
    (store / store_files.USAGE_FILE).unlink()     # no estimate: the next write scans and prunes
    trace_store.store(_key(1), "graph", "y")
    assert fresh.exists() and not stale.exists()
    assert trace_store.clear() == 3 and not fresh.exists() and not list(store.iterdir())


def test_eviction_goes_by_last_use_and_oversized_entries_warn(store, monkeypatch):
    monkeypatch.setenv("GRAPHROOF_CACHE_MB", str(2600 / 1e6))
    blob = [os.urandom(1000) for _ in range(4)]
    trace_store.store(_key(1), "graph", blob[1])
    trace_store.store(_key(2), "graph", blob[2])
    old = time.time() - 100
    for p in store.glob("*/*/graph.json.z"):
        os.utime(p, (old, old))
    assert trace_store.load(_key(1), "graph") == blob[1]     # read on every run: kept
    trace_store.store(_key(3), "graph", blob[3])
    assert trace_store.load(_key(1), "graph") == blob[1] and trace_store.load(_key(2), "graph") is None
    _, warned = _collect(lambda: trace_store.store(_key(4), "graph", os.urandom(4000)))
    assert len(warned) == 1 and "larger than the store's limit" in warned[0]
    assert trace_store.load(_key(4), "graph") is None


def test_writes_do_not_scan_the_store(store, monkeypatch):
    trace_store.store(_key(), "graph", 1)
    scans = []
    real = store_walk.scan
    monkeypatch.setattr(store_walk, "scan", lambda root: scans.append(1) or real(root))
    for n in range(20):
        trace_store.store(_key(n + 1), "graph", n)
    assert scans == []
    assert int((store / store_files.USAGE_FILE).read_text().split()[0]) > 0


def test_old_pickle_entries_are_never_read(store):
    trace_store.store(_key(), "graph", 1)
    d = next(store.glob("*/*"))
    (d / "graph.pkl.z").write_bytes(zlib.compress(pickle.dumps(2)))
    assert trace_store.usage().old == 1
    assert trace_store.clear() == 2


def test_cli_cache_info_reports_a_refused_store(store, capsys):
    from graphroof.cli import main

    trace_store.store(_key(), "graph", 1)
    store.chmod(0o777)
    assert main(["cache", "info"]) == 0
    assert "writable by group or others" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("graphroof: error: not clearing")


_ROUND_TRIP = r"""
import json, os, sys, warnings
warnings.simplefilter("ignore")
import graphroof
from graphroof.frontends import trace_store
from graphroof.options import Options
cfg = sys.argv[1]
off = graphroof.analyze(cfg, hw="a100", seq=16, options=Options(store=False))
graphroof.analyze(cfg, hw="a100", seq=16)            # traced and stored
hit = graphroof.analyze(cfg, hw="a100", seq=16)      # read back
fig = lambda a: (a.totals.as_dict(), [(r["name"], r["flops"], r["bytes"]) for r in a.ops])
print(json.dumps({"same": fig(off) == fig(hit), "files": trace_store.usage()[1]}))
"""


def test_round_trip_of_a_real_graph_gives_identical_analysis(store, tmp_path):
    pytest.importorskip("transformers")
    import json
    import resource

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64,
                                   intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=100, max_position_embeddings=512)))

    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))

    env = {**os.environ, "GRAPHROOF_CACHE": "on", "GRAPHROOF_CACHE_DIR": str(store)}
    r = subprocess.run([sys.executable, "-c", _ROUND_TRIP, str(cfg)], capture_output=True, text=True, timeout=300,
                       env=env, preexec_fn=limits, cwd=str(Path(__file__).resolve().parents[2]))
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {"same": True, "files": 1}
