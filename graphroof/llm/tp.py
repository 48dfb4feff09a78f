"""Tensor parallelism (Megatron-LM style) on an OpGraph: per-device costs plus the collectives the split needs.

The split, by module name (the last matching part of an op's scope, see :class:`TPPlan`):

* column-parallel linears (``q_proj k_proj v_proj gate_proj up_proj``, fused ``qkv`` / ``c_attn`` ...): the
  weight is split along its output features, the input is replicated, the output is sharded;
* everything downstream of a sharded tensor (rotary, attention over the device's heads, the KV cache of
  those heads, SiLU * up) is sharded, up to
* row-parallel linears (``o_proj down_proj dense c_proj fc2`` ...): the weight is split along its input
  features, each device produces partial sums of the full output, and an **all-reduce** follows the module;
* fused MoE ``experts`` modules (grouped GEMMs over ``[experts, ...]`` weights): every expert's FFN is split the
  same way (the first grouped GEMM reads the replicated tokens, the second produces partial sums), with one
  all-reduce after the module; the router stays replicated;
* the token embedding is vocab-parallel (rows split, partial outputs, all-reduce after it) and the LM head
  column-parallel over the vocabulary with an **all-gather** of the logits after it;
* norms, residual adds and anything else outside those regions are replicated (full cost on every device);
* more devices than KV heads (``N = r x kv_heads``, GQA / MQA models: vLLM, SGLang and TensorRT-LLM all do it):
  each KV head is replicated on ``r`` devices, so the K / V projections (``k_proj v_proj`` ...), their rotary,
  the KV cache and its appends are split ``kv_heads`` ways, not ``N`` (:attr:`TPPlan.kv_heads`; the query heads,
  the attention's FLOPs and everything else still ``N`` ways).  A fused QKV projection cannot be split that way
  here (its K / V columns are not told apart): such a model needs ``N <= kv_heads``.

Costs are per device.  A sharded op costs ``1/N`` of its FLOPs and of the bytes of its sharded tensors, and
the full bytes of its replicated tensors (the input of a column-parallel linear, the partial-sum output of a
row-parallel one, masks and rotary tables): ``cost/N + (1 - 1/N) * bytes(replicated tensors)``, capped at the
unsharded cost.  With KV heads replicated, an op whose sharded inputs are all K / V (a K / V projection, the cache
append, K's rotary) costs ``1/kv_heads`` instead of ``1/N``; an op that also reads the query heads (attention)
costs ``1/N`` plus ``(1/kv_heads - 1/N) * bytes(its K / V inputs)``.  Tensor shapes in op rows stay the unsharded
ones; the op's ``tp_shard`` attr records the split.
Collectives are ``comm.*`` ops (see :mod:`graphroof.counters.rules.comm`) costed on the interconnect.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import networkx as nx

from ..counters.common import read_bytes, write_bytes
from ..counters.cost import Cost
from ..errors import InputError
from ..graph import COST, OP, OpGraph, OpNode, Role, TensorSpec, edge_copies, fill_digraph

__all__ = ["TPPlan", "DEFAULT_PLAN", "check_tp", "shard", "scale_costs", "COMM_OPS"]

COMM_OPS = ("comm.all_reduce", "comm.all_gather")


@dataclass(frozen=True)
class TPPlan:
    """Module names (scope parts) that decide the split."""

    column: frozenset[str] = frozenset({
        "q_proj", "k_proj", "v_proj", "qkv_proj", "gate_proj", "up_proj", "gate_up_proj", "c_attn", "c_fc",
        "query_key_value", "query", "key", "value", "fc1", "w1", "w3", "wq", "wk", "wv", "Wqkv",
        "dense_h_to_4h", "fc_in",
        "q", "k", "v", "wi", "wi_0", "wi_1",  # T5: attention q / k / v, MLP wi (gated: wi_0, wi_1)
    })
    row: frozenset[str] = frozenset({
        "o_proj", "down_proj", "out_proj", "c_proj", "dense", "fc2", "w2", "wo", "dense_4h_to_h", "fc_out", "o",
        "experts",  # fused MoE experts (one [E, ...] weight per projection): up / gate split, down reduced
    })
    embed: frozenset[str] = frozenset({"embed_tokens", "wte", "word_embeddings", "embed_in", "tok_embeddings"})
    lm_head: frozenset[str] = frozenset({"lm_head", "embed_out"})
    #: column-parallel modules that project K or V alone (split by KV heads when the TP degree exceeds them)
    kv: frozenset[str] = frozenset({"k_proj", "v_proj", "key", "value", "wk", "wv", "k", "v"})
    #: column-parallel modules that project Q, K and V in one linear
    fused_qkv: frozenset[str] = frozenset({"qkv_proj", "c_attn", "query_key_value", "Wqkv", "wqkv"})
    #: the model's KV heads (None: unknown): a TP degree above them replicates each KV head (module docstring)
    kv_heads: int | None = None

    def projects_kv(self, kind: str | None, mscope: str) -> bool:
        """Whether the module *mscope* of *kind* (:meth:`kind`) is a column-parallel K or V projection."""
        return kind == "column" and mscope.rsplit(".", 1)[-1] in self.kv

    def kv_split(self, n: int) -> int:
        """Ways the K / V heads are split at TP degree *n*: ``kv_heads`` when *n* exceeds them, else *n*."""
        return self.kv_heads if self.kv_heads and n > self.kv_heads else n

    def kind(self, scope: str) -> tuple[str | None, str]:
        """(``column`` | ``row`` | ``embed`` | ``lm_head`` | None, module scope) of the deepest matching part."""
        parts = scope.split(".")
        for i in range(len(parts) - 1, -1, -1):
            for kind in ("column", "row", "embed", "lm_head"):
                if parts[i] in getattr(self, kind):
                    return kind, ".".join(parts[: i + 1])
        return None, ""


DEFAULT_PLAN = TPPlan()


def check_tp(n: int, heads: int | None = None, kv_heads: int | None = None,
             intermediate: int | None = None) -> None:
    """Raise :class:`InputError` when ``N`` cannot split the model's heads / MLP evenly, or neither divides its KV
    heads nor is a multiple of them (replicated KV heads: the module docstring)."""
    if not isinstance(n, int) or n < 1:
        raise InputError(f"--tp must be an integer >= 1, got {n!r}")
    if n == 1:
        return

    def fits(d: int) -> bool:  # a degree the heads, KV heads (above them: replicated, a multiple) and MLP allow
        return ((not heads or heads % d == 0) and (not kv_heads or kv_heads % d == 0 or d % kv_heads == 0)
                and (not intermediate or intermediate % d == 0))

    for what, v in (("attention heads", heads), ("MLP intermediate size", intermediate)):
        if v and v % n:
            ok = [d for d in range(1, min(v, 64) + 1) if v % d == 0 and fits(d)]
            raise InputError(f"--tp {n} does not divide the model's {v} {what}; use one of: "
                             f"{', '.join(str(d) for d in ok)}")
    if kv_heads and kv_heads % n and n % kv_heads:
        ok = [d for d in range(1, 65) if fits(d)]
        raise InputError(f"--tp {n} neither divides the model's {kv_heads} KV heads nor is a multiple of them (above "
                         f"the KV heads each is replicated on tp / {kv_heads} devices); use one of: "
                         f"{', '.join(str(d) for d in ok)}")


def _producers(g: OpGraph, name: str, node: OpNode,
               out_specs: dict[str, frozenset[tuple]] | None = None) -> list[str | None]:
    """Producer op of each activation input (matched by shape and dtype among the predecessors).

    *out_specs* (op name -> its outputs' ``(shape, dtype)``) is filled as producers are looked at, so a caller
    walking the whole graph reads each op's outputs once."""
    if out_specs is None:
        out_specs = {}
    preds = list(g.nx.predecessors(name))
    out: list[str | None] = []
    for t in node.inputs:
        if t is None or t.role in (Role.WEIGHT, Role.CONST):
            out.append(None)
            continue
        sig = (t.shape, t.dtype)
        found = None
        for p in preds:
            specs = out_specs.get(p)
            if specs is None:
                specs = out_specs[p] = frozenset((o.shape, o.dtype) for o in g.node(p).outputs)
            if sig in specs:
                found = p
                break
        out.append(found if found is not None else (preds[0] if len(preds) == 1 else None))
    return out


def _exits(g: OpGraph, plan: TPPlan, kinds: dict[str, tuple[str | None, str]] | None = None
           ) -> dict[str, tuple[str, str]]:
    """Last op of each row / embed / lm_head module instance -> (collective, module scope)."""
    kinds = {} if kinds is None else kinds
    last: dict[str, tuple[str, str]] = {}
    for op in g.ops():
        kind, mscope = _kind_of(plan, op.scope, kinds)
        if kind in ("row", "embed", "lm_head"):
            last[mscope] = (op.name, kind)
    return {name: ("comm.all_gather" if kind == "lm_head" else "comm.all_reduce", mscope)
            for mscope, (name, kind) in last.items()}


def _kind_of(plan: TPPlan, scope: str, kinds: dict[str, tuple[str | None, str]]) -> tuple[str | None, str]:
    """``plan.kind(scope)``, remembered in *kinds* (every decoder block repeats the same few scope tails, but
    the scopes differ by layer index, so the memo is per call and keyed by the whole scope)."""
    k = kinds.get(scope)
    if k is None:
        k = kinds[scope] = plan.kind(scope)
    return k


def _comm_scope(kind: str, mscope: str) -> str:
    parts = mscope.split(".")
    if kind == "comm.all_gather":
        return f"{mscope}_all_gather"
    if len(parts) >= 2 and not parts[-1].isdigit() and parts[-1] not in DEFAULT_PLAN.embed:
        return f"{'.'.join(parts[:-1])}_all_reduce"
    return f"{mscope}_all_reduce"


def _shard_spec(t: TensorSpec, n: int) -> TensorSpec:
    last = t.shape[-1]
    d = -(-last // n) if isinstance(last, int) else f"({last}) // {n}"
    return replace(t, shape=(*t.shape[:-1], d))


def _insert_comms(g: OpGraph, n: int, plan: TPPlan, kinds: dict[str, tuple[str | None, str]] | None = None
                  ) -> OpGraph:
    exits = _exits(g, plan, kinds)
    out = OpGraph(g.name, g.meta)
    out.nx = nx.DiGraph()
    out.nx.graph.update(g.nx.graph)
    comm_of: dict[str, str] = {}
    nodes: list[tuple[str, dict]] = []
    for name, data in g.nx.nodes(data=True):
        nodes.append((name, dict(data)))
        if name in exits:
            kind, mscope = exits[name]
            op = data["op"]
            full = op.outputs[0]
            src = _shard_spec(full, n) if kind == "comm.all_gather" else full
            cname = f"{name}__{kind.split('.')[1]}"
            comm = OpNode(cname, kind, (src,), (full,), {"world_size": n, "algorithm": "ring"},
                          _comm_scope(kind, mscope))
            nodes.append((cname, {"op": comm}))
            comm_of[name] = cname
    edges: list[tuple[str, str, dict]] = []
    for u, v, data in edge_copies(g.nx):  # not g.nx.edges: see edge_copies
        mscope = exits[u][1] if u in comm_of else ""
        if u in comm_of and not (g.node(v).scope == mscope or g.node(v).scope.startswith(mscope + ".")):
            edges.append((comm_of[u], v, data))
        else:
            edges.append((u, v, data))
    edges.extend((u, c, {"tensor": f"{u}:out"}) for u, c in comm_of.items())
    fill_digraph(out.nx, nodes, edges)  # in bulk, the same graph as one add_node / add_edge per op / tensor
    out.set_producers({t: comm_of.get(p, p) for t, p in g.producers.items()})
    return out


def shard(graph: OpGraph, n: int, plan: TPPlan = DEFAULT_PLAN) -> OpGraph:
    """The graph split over ``n`` devices: collectives inserted, sharded ops marked (``attrs["tp_shard"]``).

    Run :func:`scale_costs` after counting to turn the counts into per-device costs.
    """
    if n == 1:
        return graph
    kinds: dict[str, tuple[str | None, str]] = {}
    if not any(_kind_of(plan, op.scope, kinds)[0] in ("column", "row") for op in graph.ops()):
        raise InputError(f"--tp {n}: no column/row-parallel linear layers found in the op scopes "
                         f"(expected module names such as q_proj, o_proj, gate_proj, down_proj); tensor "
                         "parallelism needs a model with module scopes")
    kvs = plan.kv_split(n)
    if kvs < n:
        fused = sorted({m for op in graph.ops() for m in [_kind_of(plan, op.scope, kinds)[1].rsplit(".", 1)[-1]]
                        if m in plan.fused_qkv})
        if fused:
            raise InputError(f"--tp {n} exceeds the model's {plan.kv_heads} KV heads, and its attention projects "
                             f"Q, K and V in one linear ({fused[0]}): graphroof replicates KV heads only where K and "
                             f"V have projections of their own; use a TP degree that divides {plan.kv_heads}")
    g = _insert_comms(graph, n, plan, kinds)
    state: dict[str, tuple[bool, bool, bool, bool]] = {}  # op -> (output sharded, weight-only, partial, K/V only)
    decided: dict[tuple, tuple] = {}                # _split's memo: the blocks repeat the same decisions
    updates: dict[str, OpNode] = {}
    out_specs: dict[str, frozenset[tuple]] = {}
    for name, data in g.nx.nodes(data=True):
        op = data["op"]
        if op.op in COMM_OPS:
            state[name] = _NOT_SPLIT
            continue
        kind, mscope = _kind_of(plan, op.scope, kinds)
        prods = _producers(g, name, op, out_specs)
        ins = tuple(_input_case(t, p, state) for t, p in zip(op.inputs, prods))
        kv_module = kvs < n and plan.projects_kv(kind, mscope)
        grows = kvs < n and _grows(op, ins)
        key = (kind, ins, len(op.outputs), kv_module, grows)
        d = decided.get(key)
        if d is None:
            d = decided[key] = _split(kind, ins, len(op.outputs), n, kvs, kv_module, grows)
        state[name], info = d
        if info is not None:
            updates[name] = replace(op, attrs={**op.attrs, "tp_shard": dict(info)})
    for name, op in updates.items():
        g.set(name, "op", op)
    g.meta["tp"] = n
    return g


_NOT_SPLIT = (False, False, False, False)


def _grows(op: OpNode, ins: tuple) -> bool:
    """Whether *op* writes more elements than its largest K / V-only input holds (``repeat_kv``: K / V expanded to
    every query head, split ``N`` ways again)."""
    kv_in = [t.numel for t, c in zip(op.inputs, ins)
             if t is not None and c is not None and (c == ("kv",) or (c[0] is True and c[3]))]
    outs = [t.numel for t in op.outputs if t is not None]
    try:
        return bool(kv_in and outs) and max(outs) > max(kv_in)
    except TypeError:  # symbolic sizes that do not compare: not an expansion graphroof can tell
        return False


def _input_case(t: TensorSpec | None, p: str | None, state: dict[str, tuple[bool, bool, bool, bool]]
                ) -> tuple | None:
    """What the split of an op needs to know of one input: absent (None), a weight / constant (its role and
    rank), a cache input with no producer, or the (sharded, weight-only, partial, K/V-only) state of its
    producer."""
    if t is None:
        return None
    if t.role is Role.WEIGHT or t.role is Role.CONST:
        return ("w", t.role, t.rank)
    if t.role is Role.KV_CACHE and p is None:
        return ("kv",)
    return state.get(p, _NOT_SPLIT) if p else _NOT_SPLIT


def _split(kind: str | None, ins: tuple, n_out: int, n: int, kvs: int | None = None, kv_module: bool = False,
           grows: bool = False) -> tuple[tuple[bool, bool, bool, bool], dict | None]:
    """(state of the op's output, its ``tp_shard`` attr or None) from its module *kind* and input cases; *kvs*:
    the ways K / V are split (below *n*: replicated KV heads), *kv_module*: the op is a K / V projection's, *grows*:
    it expands its K / V input (:func:`_grows`)."""
    kvs = n if kvs is None else kvs
    in_sh, in_w, in_partial, in_kv = [], [], [], []
    for c in ins:
        if c is None:
            in_sh.append(False)
            in_w.append(False)
            in_partial.append(False)
            in_kv.append(False)
        elif c[0] == "w":
            # a row-parallel bias (rank 1) is added to the full output: replicated
            sh = kind is not None and c[1] is Role.WEIGHT and not (kind == "row" and c[2] == 1)
            in_sh.append(sh)
            in_w.append(True)
            in_partial.append(False)
            in_kv.append(sh and kv_module)
        elif c[0] == "kv":
            in_sh.append(True)
            in_w.append(False)
            in_partial.append(False)
            in_kv.append(True)
        else:
            in_sh.append(c[0])
            in_w.append(c[1])
            in_partial.append(c[2])
            in_kv.append(c[0] and c[3])
    weightish = bool(ins) and all(in_w[i] for i, c in enumerate(ins) if c is not None)
    act_sh = any(s and not w for s, w in zip(in_sh, in_w))
    if kind in ("row", "embed") and any(in_w) and (act_sh or kind == "embed") and not weightish:
        out_sh, partial = False, True          # partial sums of the full output: reduced after
    elif kind in ("row", "embed") and any(in_partial):
        out_sh, partial = False, True          # e.g. the view / bias add after the matmul
    else:
        out_sh, partial = any(in_sh), False
    sharded = [i for i, s in enumerate(in_sh) if s]
    # K / V alone (split kvs ways): every sharded input is, and the op does not expand them to the query heads
    out_kv = kvs < n and out_sh and bool(sharded) and all(in_kv[i] for i in sharded) and not grows
    info = None
    if any(in_sh) or out_sh:
        rep_in = tuple(i for i, c in enumerate(ins) if c is not None and not in_sh[i])
        rep_out = () if out_sh else tuple(range(n_out))
        info = {"world_size": n, "replicated_inputs": rep_in, "replicated_outputs": rep_out}
        if out_kv:
            info["divisor"] = kvs
        elif kvs < n and any(in_kv):
            info["kv_split"] = kvs
            info["kv_inputs"] = tuple(i for i in sharded if in_kv[i])
    return (out_sh, weightish, partial, out_kv), info


def _cap(new: Cost, old: Cost) -> Cost:
    return Cost(min(new.matrix_flops, old.matrix_flops), min(new.vector_flops, old.vector_flops),
                min(new.weight_bytes, old.weight_bytes), min(new.act_read_bytes, old.act_read_bytes),
                min(new.act_write_bytes, old.act_write_bytes), min(new.kv_read_bytes, old.kv_read_bytes),
                min(new.kv_write_bytes, old.kv_write_bytes), min(new.net_bytes, old.net_bytes),
                estimated=old.estimated)


def shard_cost(op: OpNode, cost: Cost) -> Cost:
    """Per-device cost of one op marked by :func:`shard` (see the module docstring for the formula)."""
    info = op.attrs.get("tp_shard")
    if not info:
        return cost
    n = info.get("divisor", info["world_size"])  # K / V-only ops of replicated KV heads: split kv_heads ways
    keep = 1 - 1 / n
    r = read_bytes(op.inputs[i] for i in info["replicated_inputs"])
    w = write_bytes(op.outputs[i] for i in info["replicated_outputs"])
    back = Cost(weight_bytes=r["weight_bytes"] * keep, act_read_bytes=r["act_read_bytes"] * keep,
                kv_read_bytes=r["kv_read_bytes"] * keep, act_write_bytes=w["act_write_bytes"] * keep,
                kv_write_bytes=w["kv_write_bytes"] * keep)
    if info.get("kv_inputs"):  # an op over the query heads reading K / V split fewer ways: their bytes 1/kv_split
        more = 1 / info["kv_split"] - 1 / n
        k = read_bytes(op.inputs[i] for i in info["kv_inputs"])
        back = back + Cost(weight_bytes=k["weight_bytes"] * more, act_read_bytes=k["act_read_bytes"] * more,
                           kv_read_bytes=k["kv_read_bytes"] * more)
    return _cap(cost.scale(1 / n) + back, cost)


def scale_costs(graph: OpGraph) -> None:
    """Replace each sharded op's counted cost by its per-device cost (run after ``counters.count``).

    The per-device cost depends only on the op key, the tensor specs, the split and the counted cost, so ops
    that agree on all of them (the same op in every decoder block) share one computation."""
    seen: dict[tuple, Cost] = {}
    for _, data in graph.nx.nodes(data=True):
        op = data[OP]
        info = op.attrs.get("tp_shard")
        if not info:
            continue
        cost = data.get(COST)
        key: tuple | None = (op.op, op.inputs, op.outputs, info["world_size"], tuple(info["replicated_inputs"]),
                             tuple(info["replicated_outputs"]), info.get("divisor"), info.get("kv_split"),
                             tuple(info.get("kv_inputs", ())), cost)
        try:
            hit = seen.get(key)  # type: ignore[arg-type]  # key is the tuple just built
        except TypeError:  # an unhashable cost or spec: computed on its own
            key = hit = None
        if hit is None:
            hit = shard_cost(op, cost)
            if key is not None:
                seen[key] = hit
        data[COST] = hit
