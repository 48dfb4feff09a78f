"""Recording a traced block for :mod:`.fold`: the op sequence one member of a group produced (:class:`Recording`),
the check that two recordings are the same program up to the member's index (:func:`unify`), and snapshots of the
members' state and caches taken before and after the trace (side effects other than KV-cache updates stop a
group from folding)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import torch

from ...graph import OpNode
from .blocks import PRIMITIVE, Member


class FolderView(Protocol):
    """What a :class:`Recording` reads from the folder that made it: the capture and a member's parameter names."""

    cap: Any

    def param_names(self, m: Member) -> dict[str, str]: ...


# -- recording a traced block ------------------------------------------------------------------------------

def _is_cache(v: Any) -> bool:
    return type(v).__module__.startswith("transformers.cache_utils") and hasattr(v, "update")


def cache_objects(leaves: list[tuple[tuple, Any]]) -> Iterator[tuple[tuple, Any]]:
    """``(path, cache)`` of every cache a call can update: argument caches, and the caches an argument of
    transformers' cache module holds (``EncoderDecoderCache``: its self- and cross-attention caches, path
    ``("nested", argument path, attribute)``)."""
    for p, v in leaves:
        if _is_cache(v):
            yield p, v
        if type(v).__module__.startswith("transformers.cache_utils"):
            for attr, x in vars(v).items():
                if _is_cache(x):
                    yield ("nested", p, attr), x


def cache_at(at: dict, path: tuple) -> Any:
    """The cache at *path* (see :func:`cache_objects`) among a call's leaves *at*."""
    if path and path[0] == "nested":
        return getattr(at[path[1]], path[2])
    return at[path]


def tree_leaves(obj: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """``(path, leaf)`` of the call arguments: tensors, primitives, caches, other objects (opaque)."""
    if isinstance(obj, (tuple, list)):
        yield path, ("seq", type(obj).__name__, len(obj))
        for i, x in enumerate(obj):
            yield from tree_leaves(x, (*path, i))
    elif isinstance(obj, dict):
        yield path, ("dict", tuple(obj))
        for k, x in obj.items():
            yield from tree_leaves(x, (*path, k))
    else:
        yield path, obj


def _tensor_key(t: torch.Tensor) -> tuple:
    return ("tensor", tuple(int(d) for d in t.shape), tuple(int(s) for s in t.stride()), t.dtype, t.device.type)


def leaf_key(v: Any) -> Any:
    """What must agree between two calls for one to stand for the other."""
    if isinstance(v, torch.Tensor):
        if any(isinstance(d, torch.SymInt) for d in v.shape):
            return ("opaque", id(v))
        return _tensor_key(v)
    if isinstance(v, tuple) and v and v[0] in ("seq", "dict"):
        return v
    if isinstance(v, PRIMITIVE) or isinstance(v, (torch.dtype, torch.device)):
        return ("value", v)
    if _is_cache(v):
        return ("cache", type(v))
    return ("opaque", id(v))


def leaf_keys(leaves: Iterable[tuple[tuple, Any]]) -> tuple:
    """``(path, leaf_key)`` of every leaf (:func:`tree_leaves`): equal for two calls that stand for each other."""
    return tuple((p, leaf_key(v)) for p, v in leaves)


def take_snapshot(mods: list[torch.nn.Module], caches: list[Any]) -> tuple[list[tuple], list[tuple[tuple, list[tuple]]]]:
    """Identity snapshots of the block's modules' attributes and of each cache and its layers (side effects)."""
    ms = []
    for o in mods:
        d = vars(o)
        ms.append(tuple((k, id(v)) for k, v in d.items()))
        for k in ("_parameters", "_buffers"):
            ms.append(tuple((n, id(t)) for n, t in d.get(k, {}).items()))
    cs = []
    for c in caches:
        layers = getattr(c, "layers", None)
        layers = list(layers) if isinstance(layers, list) else []
        cs.append((tuple((k, id(v)) for k, v in vars(c).items()),
                   [tuple((k, id(v)) for k, v in vars(lay).items()) for lay in layers]))
    return ms, cs


_CONST = re.compile(r"const_(\d+)")
_NUM = re.compile(r"(\d+)")


def _scope_token(scope: str, prefix: str) -> tuple[str, str]:
    if scope == prefix:
        return ("rel", "")
    if prefix and scope.startswith(prefix + "."):
        return ("rel", scope[len(prefix) + 1:])
    return ("abs", scope)


def _plain_container(obj: Any) -> bool:
    if isinstance(obj, (tuple, list, dict)):
        return type(obj) in (tuple, list, dict) and all(
            _plain_container(x) for x in (obj.values() if isinstance(obj, dict) else obj))
    return True


class Recording:
    """A traced block in comparable form: ``canon`` (everything but where inputs come from) and ``tokens`` (where
    each node input / output, output leaf and cache update comes from: ``("out", k, i)`` node k's output i,
    ``("arg", path)`` the block's argument, ``("param", rel)`` its parameter, ``("const", j)`` a constant first
    seen in the block, ``("ext", name)`` any other tensor, ``("layer", i)`` a cache layer index)."""

    def __init__(self, folder: FolderView, m: Member, leaves: list[tuple[tuple, Any]], in_keys: tuple,
                 names: list[str], out: Any, updates: list[tuple[Any, tuple, dict]], unk0: int, reason: str):
        from ...graph import IN_TENSORS, OP, OUT_TENSORS

        refs = folder.cap.refs
        nxn = folder.cap.b.graph.nx.nodes
        self.member, self.in_keys, self.reason, self.out = m, in_keys, reason, out
        self.n_const = folder.cap.n_unknown - unk0
        argname: dict[str, tuple] = {}
        for p, v in leaves:
            if isinstance(v, torch.Tensor):
                r = refs.get(v)
                if r is not None:
                    argname.setdefault(r.name, p)
        pname = {n: rel for rel, n in folder.param_names(m).items()}
        local: dict[str, tuple] = {}

        def tok(n: str | None) -> tuple | None:
            if n is None:
                return None
            t = local.get(n) or (("arg", argname[n]) if n in argname else None) or \
                (("param", pname[n]) if n in pname else None)
            if t is not None:
                return t
            c = _CONST.fullmatch(n)
            if c and int(c.group(1)) > unk0:
                return ("const", int(c.group(1)) - unk0)
            return ("ext", n)

        canon: list[Any] = []
        tokens: list[Any] = []
        self.nodes: list[OpNode] = []
        for k, name in enumerate(names):
            d = nxn[name]
            op: OpNode = d[OP]
            base = op.op.split(".", 1)[1]
            if not (name == base or (name.startswith(base + "_") and name[len(base) + 1:].isdigit())):
                self.reason = self.reason or f"node {name!r} is not named after its op"
            ins, outs = d[IN_TENSORS], d[OUT_TENSORS]
            canon.append((op.op, _scope_token(op.scope, m.prefix), op.attrs, op.inputs, op.outputs,
                          len(ins), len(outs)))
            tokens.extend(tok(n) for n in ins)
            for i, n in enumerate(outs):
                t = ("out", k, None) if n == name else ("out", k, i) if n == f"{name}:{i}" else tok(n)
                if t is not None and t[0] == "out":
                    local[n] = t
                tokens.append(t)
            self.nodes.append(op)
        if not _plain_container(out):
            self.reason = self.reason or f"returns a {type(out).__name__}"
        arg_objs = {id(v): p for p, v in leaves}
        for p, v in tree_leaves(out):
            if isinstance(v, torch.Tensor):
                r = refs.get(v)
                if r is None or any(isinstance(x, torch.SymInt) for x in v.shape):
                    self.reason = self.reason or "returns a tensor the capture does not know"
                    continue
                canon.append(("leaf", p, _tensor_key(v), r.spec))
                tokens.append(tok(r.name))
            elif isinstance(v, tuple) or isinstance(v, PRIMITIVE):
                canon.append(("value", p, v))
            elif id(v) in arg_objs:
                canon.append(("argobj", p, arg_objs[id(v)]))
            else:
                self.reason = self.reason or f"returns a {type(v).__name__}"
        self.updates: list[tuple[tuple, Any, tuple, tuple, tuple, dict]] = []
        cache_paths = {id(c): p for p, c in cache_objects(leaves)}
        for cache, args, kwargs in updates:
            path = cache_paths.get(id(cache))
            pos: Any = 2 if len(args) > 2 else "layer_idx" if "layer_idx" in kwargs else None
            layer = args[2] if pos == 2 else kwargs.get("layer_idx")
            if path is None or pos is None or not isinstance(layer, int) or len(args) < 2 or \
                    not all(isinstance(t, torch.Tensor) for t in args[:2]):
                self.reason = self.reason or "updates a cache it was not given"
                continue
            kk, vk = _tensor_key(args[0]), _tensor_key(args[1])
            canon.append(("update", path, kk, vk, len(args), tuple(sorted(kwargs))))
            tokens.append(("layer", layer))
            self.updates.append((path, pos, kk, vk, args, kwargs))
        self.canon = canon
        self.tokens = tokens
        self.final: list[Any] | None = None     # tokens with per-layer names resolved (set by unify)
        self._plan: _Plan | None = None

    def plan(self) -> _Plan:
        if self._plan is None:
            self._plan = _Plan(self)
        return self._plan


class _Plan:
    """A template's nodes laid out for replication: per node its name base, scope and where each input and
    output comes from (``("x", token)`` outside the block, ``("o", k, i)`` node k's output i)."""

    def __init__(self, t: Recording):
        assert t.final is not None
        seen: dict[Any, Any] = {}
        for tok, raw in zip(t.final, t.tokens):
            if tok is not None and tok[0] not in ("out", "lidx", "layer"):
                seen.setdefault(tok, raw)
        self.externals = list(seen.items())

        def where(tok: Any) -> Any:
            if tok is None:
                return None
            return ("o", tok[1], tok[2]) if tok[0] == "out" else ("x", tok)

        self.nodes = []
        pos = 0
        for k, op in enumerate(t.nodes):
            n_in, n_out = t.canon[k][5], t.canon[k][6]
            kind, rel = t.canon[k][1]
            ins = tuple(where(x) for x in t.final[pos:pos + n_in])
            outs = tuple(where(x) for x in t.final[pos + n_in:pos + n_in + n_out])
            pos += n_in + n_out
            self.nodes.append((op.op.split(".", 1)[1], op, kind, rel, ins, outs))
        leaf_canon = [c for c in t.canon if c[0] == "leaf"]
        self.leaves = [where(x) for x in t.final[pos:pos + len(leaf_canon)]]
        self.leaf_specs = [(c[2], c[3]) for c in leaf_canon]
        self.layers = t.final[len(t.final) - len(t.updates):] if t.updates else []
        self.arg_objs = {c[1]: c[2] for c in t.canon if c[0] == "argobj"}


def _idx_token(na: str, nb: str, ia: dict, ib: dict) -> tuple | None:
    """Names that differ only in numbers following one index value (``past_key_0`` / ``past_key_1``)."""
    pa, pb = _NUM.split(na), _NUM.split(nb)
    if len(pa) != len(pb):
        return None
    diff = tuple(j for j in range(len(pa)) if pa[j] != pb[j])
    if not diff or any(j % 2 == 0 for j in diff):
        return None
    for key in sorted(ia, key=lambda k: (k == ("index",), k)):  # layer_idx-like attributes first
        if key in ib and all(pa[j] == str(ia[key]) and pb[j] == str(ib[key]) for j in diff):
            return ("idx", tuple(None if j in diff else x for j, x in enumerate(pb)), key)
    return None


def unify(x: Recording, y: Recording) -> list[Any] | None:
    """*y*'s tokens with what differs from *x* expressed per layer, or None when *y* is not *x* replicated."""
    if x.reason or y.reason or x.in_keys != y.in_keys or x.canon != y.canon or x.n_const != y.n_const or \
            len(x.tokens) != len(y.tokens):
        return None
    out: list[Any] = []
    for tx, ty in zip(x.tokens, y.tokens):
        if tx == ty:
            out.append(ty)
        elif tx is not None and ty is not None and tx[0] == ty[0] == "ext":
            t = _idx_token(tx[1], ty[1], x.member.index, y.member.index)
            if t is None:
                return None
            out.append(t)
        elif tx is not None and ty is not None and tx[0] == ty[0] == "layer":
            key = next((k for k in sorted(x.member.index, key=lambda k: (k == ("index",), k))
                        if x.member.index[k] == tx[1] and y.member.index.get(k) == ty[1]), None)
            if key is None:
                return None
            out.append(("lidx", key))
        else:
            return None
    return out


class NotReplicable(Exception):
    pass


def rebuild_tree(obj: Any, leaf: Any) -> Any:
    """*obj* with every non-container leaf replaced by ``leaf(path, value)`` (plain tuples, lists, dicts)."""
    def go(o: Any, path: tuple) -> Any:
        if isinstance(o, (tuple, list)):
            return type(o)(go(x, (*path, i)) for i, x in enumerate(o))
        if isinstance(o, dict):
            return {k: go(x, (*path, k)) for k, x in o.items()}
        return leaf(path, o)
    return go(obj, ())
