"""Registry policy and the unknown-op path of the counting pass."""

from __future__ import annotations

import warnings

import pytest

from graphroof import Cost, GraphroofWarning, OpGraph, UnsupportedOpError
from graphroof.counters import count
from graphroof.counters.registry import FREE, RuleRegistry
from graphroof.graph import COST
from tests.conftest import T, W, node


def _rule(n):
    return Cost(vector_flops=1)


def test_duplicate_registration_raises_and_names_first():
    reg = RuleRegistry()
    reg.register("x.op")(_rule)
    with pytest.raises(ValueError, match=r"duplicate rule for 'x.op' \(first: .*_rule\)"):
        reg.register("x.op")(lambda n: Cost())


def test_override_replaces():
    reg = RuleRegistry()
    reg.register("x.op")(_rule)
    new = reg.register("x.op", override=True)(lambda n: Cost(vector_flops=7))
    assert reg.lookup("x.op") is new


def test_register_needs_a_key():
    with pytest.raises(TypeError):
        RuleRegistry().register()


def test_none_is_free_and_per_call_override_wins():
    reg = RuleRegistry()
    reg.register("x.a")(_rule)
    reg.free("x.view")
    assert reg.lookup("x.view") is FREE and reg.is_free("x.view")
    assert reg.lookup("x.a", {"x.a": None}) is FREE
    special = lambda n: Cost(matrix_flops=5)
    assert reg.lookup("x.a", {"x.a": special}) is special
    assert reg.lookup("x.missing") is None


def _graph(*ops):
    g = OpGraph("t")
    for o in ops:
        g.add_op(o)
    return g


def test_unknown_op_bytes_only_estimated_one_warning_with_count():
    # three nodes of one unknown op: each reads fp32[10] (40 B) and weight fp16[8] (16 B), writes fp32[5] (20 B)
    ops = [node("mylib.foo", [T("fp32", 10), W("fp16", 8)], [T("fp32", 5)], name=f"n{i}") for i in range(3)]
    g = _graph(*ops, node("x.ok", [], [], name="ok"))
    reg = RuleRegistry()
    reg.register("x.ok")(_rule)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = count(g, reg)
    msgs = [str(x.message) for x in w if issubclass(x.category, GraphroofWarning)]
    assert len(msgs) == 1 and "'mylib.foo' (3 nodes)" in msgs[0]
    assert s.unknown == {"mylib.foo": 3} and s.total == 4 and s.ruled == 1
    assert g.get("n0", COST) == Cost(weight_bytes=16, act_read_bytes=40, act_write_bytes=20, estimated=True)
    assert "unknown: mylib.foo×3" in s.coverage_line()


def test_strict_raises_listing_unknown_with_suggestion():
    g = _graph(node("x.opp", [T("fp32", 4)], [T("fp32", 4)]))
    reg = RuleRegistry()
    reg.register("x.op")(_rule)
    with pytest.raises(UnsupportedOpError, match=r"x\.opp×1 \(did you mean x\.op\?\)") as e:
        count(g, reg, strict=True)
    assert e.value.unknown == {"x.opp": 1}


def test_per_call_rule_used_by_count():
    g = _graph(node("mylib.foo", [T("fp32", 4)], [T("fp32", 4)]))
    s = count(g, RuleRegistry(), rules={"mylib.foo": lambda n: Cost(vector_flops=4)}, warn=False)
    assert s.unknown == {} and g.get("n", COST) == Cost(vector_flops=4)


def test_rule_failure_names_node_op_and_shapes():
    from graphroof import RuleError

    g = _graph(node("x.bad", [T("fp32", 2, 3)], [T("fp32", 2)], name="blk.bad", scope="blk"))
    reg = RuleRegistry()
    reg.register("x.bad")(lambda n: 1 / 0)
    with pytest.raises(RuleError, match=r"rule for x.bad failed on node 'blk.bad' \(x.bad\) inputs \[fp32\[2,3\]\]"):
        count(g, reg)


def test_builtin_registry_has_table_rule_and_global_register(monkeypatch):
    from graphroof import REGISTRY, register_rule

    assert "table.op" in REGISTRY
    monkeypatch.setattr(REGISTRY, "_rules", dict(REGISTRY._rules))
    register_rule("mylib.fused")(_rule)
    assert REGISTRY.lookup("mylib.fused") is _rule


def test_unbound_dim_error_keeps_its_type_dim_and_message():
    # a rule needing a symbolic dim's value raises UnboundDimError; the counting pass adds the node to the
    # message in place: the type, its ``dim`` attribute and the original text all survive (type(e)(msg) used to
    # call UnboundDimError(dim=<the whole message>) and garble it)
    from graphroof.errors import UnboundDimError

    g = _graph(node("x.sym", [T("fp32", "seq", 4)], [T("fp32", "seq", 4)], name="blk.sym"))
    reg = RuleRegistry()
    reg.register("x.sym")(lambda n: Cost(vector_flops=n.inputs[0].numel))
    with pytest.raises(UnboundDimError) as info:
        count(g, reg)
    e = info.value
    assert e.dim == "seq"
    msg = str(e)
    assert msg.startswith("dimension 'seq' is unbound; bind it with --dim NAME=VALUE")
    assert msg.count("dimension 'seq'") == 1
    assert "(while counting node 'blk.sym' (x.sym)" in msg


def test_unbound_repeat_count_keeps_its_type_dim_and_message():
    # the second site: an op repeated a symbolic number of times (a loop body's trip count "trips") that has no
    # value; the message gains the node and the repeat, the exception stays an UnboundDimError with dim "trips"
    from graphroof.errors import UnboundDimError
    from graphroof.graph import REPEAT

    g = _graph(node("x.rep", [T("fp32", 4)], [T("fp32", 4)], name="loop.body", **{REPEAT: "trips"}))
    reg = RuleRegistry()
    reg.register("x.rep")(lambda n: Cost(vector_flops=4))
    with pytest.raises(UnboundDimError) as info:
        count(g, reg)
    e = info.value
    assert e.dim == "trips"
    msg = str(e)
    assert msg.startswith("loop.body (x.rep): repeat trips: dimension 'trips' is unbound")
    assert msg.count("dimension 'trips'") == 1


def test_settings_reach_the_rules_that_take_them_as_an_argument():
    from graphroof.counters.count import count_node
    from graphroof.counters.registry import takes_settings
    from graphroof.counters.settings import CountSettings

    seen = []

    def two(n, settings):
        seen.append(settings)
        return Cost(vector_flops=1)

    def one(n):  # the README's user rule shape: node only
        return Cost(vector_flops=2)

    assert takes_settings(two) and not takes_settings(one)
    assert not takes_settings(lambda n, k=3: Cost())  # a second parameter not named settings is not them
    naive = CountSettings(attention="naive")
    g = _graph(node("x.two", [T("fp32", 4)], [T("fp32", 4)], name="a"))
    count(g, RuleRegistry(), rules={"x.two": two}, settings=naive, warn=False)
    assert seen == [naive] and g.meta["count_settings"] is naive
    assert count_node(node("x.one", [T("fp32", 4)], [T("fp32", 4)]), one, naive) == Cost(vector_flops=2)
    # the built-in attention rules take them: the naive model writes and reads the scores
    from graphroof.counters import REGISTRY

    sdpa = REGISTRY.lookup("aten.scaled_dot_product_attention")
    q = T("fp16", 1, 1, 4, 8)
    n = node("aten.scaled_dot_product_attention", [q, q, q], [q])
    assert takes_settings(sdpa)
    flash, slow = count_node(n, sdpa), count_node(n, sdpa, naive)
    assert slow.act_write_bytes - flash.act_write_bytes == 2 * 16 * 2  # S and P: 4 x 4 scores in fp16


def test_no_context_variable_carries_settings():
    import graphroof.counters.settings as s

    assert not hasattr(s, "current") and not hasattr(s, "use")
