"""Folded blocks: runs of identical blocks (decoder layers) traced a few times and replicated, not traced N times.

A *group* is the members of one ``nn.ModuleList`` / ``nn.Sequential`` whose :func:`block_signature` is equal:
same classes down the tree, same parameter / buffer names, shapes and dtypes, same plain attributes (per-layer
index attributes such as ``layer_idx`` aside) and the same per-layer config entries (``config.layer_types[i]``
...), so Gemma's sliding and full layers or DeepSeek's dense and MoE layers fall in different groups.  Groups of
four or more members fold:

* the first two members called are traced for real and must record the same op sequence (:class:`Recording`:
  op keys, attrs, tensor specs, scopes relative to the block, where each input comes from), the same input and
  output structure, and no side effect but KV-cache updates; otherwise the group is traced member by member;
* the group's last member is traced for real too and checked against the second; a difference after some
  member was replicated raises :class:`FoldMismatch` and the caller re-traces without folding;
* every other member whose inputs have the second's specs is *replicated*: the second's nodes are appended
  again with this member's scope, names from the same counters, inputs mapped (the member's own arguments and
  parameters, its layer's cache tensors); its cache updates are replayed on fresh tensors of the recorded shapes
  (so the cache ends as a real trace leaves it) and it returns fresh fake tensors of the recorded outputs' specs.
  The caches are those among the block's arguments and those such an argument holds (an encoder-decoder's
  ``EncoderDecoderCache``: its self- and cross-attention caches, both updated by each decoder layer).

The resulting graph is the unfolded one node for node (names, scopes, edges, specs, attrs; tested).
``fold_blocks=False`` (``Options(fold=False)``, CLI ``--no-fold-blocks``) turns it off.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import islice
from typing import Any

import torch

from ...graph import OpNode, TensorSpec
from .blocks import MIN_GROUP, PRIMITIVE, Member, block_signature, fold_groups
from .common import Ref

__all__ = ["Folder", "FoldMismatch", "block_signature", "fold_groups", "MIN_GROUP"]

class FoldMismatch(RuntimeError):
    """The last member of a group traced differently from the template after members were replicated."""


# -- recording a traced block ------------------------------------------------------------------------------

def _is_cache(v: Any) -> bool:
    return type(v).__module__.startswith("transformers.cache_utils") and hasattr(v, "update")


def _cache_objs(leaves: list[tuple[tuple, Any]]) -> Iterator[tuple[tuple, Any]]:
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


def _cache_at(at: dict, path: tuple) -> Any:
    """The cache at *path* (see :func:`_cache_objs`) among a call's leaves *at*."""
    if path and path[0] == "nested":
        return getattr(at[path[1]], path[2])
    return at[path]


def _leaves(obj: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """``(path, leaf)`` of the call arguments: tensors, primitives, caches, other objects (opaque)."""
    if isinstance(obj, (tuple, list)):
        yield path, ("seq", type(obj).__name__, len(obj))
        for i, x in enumerate(obj):
            yield from _leaves(x, (*path, i))
    elif isinstance(obj, dict):
        yield path, ("dict", tuple(obj))
        for k, x in obj.items():
            yield from _leaves(x, (*path, k))
    else:
        yield path, obj


def _tensor_key(t: torch.Tensor) -> tuple:
    return ("tensor", tuple(int(d) for d in t.shape), tuple(int(s) for s in t.stride()), t.dtype, t.device.type)


def _leaf_key(v: Any) -> Any:
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


def _snapshot(mods: list[torch.nn.Module], caches: list[Any]) -> tuple[list[tuple], list[tuple[tuple, list[tuple]]]]:
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

    def __init__(self, folder: Folder, m: Member, leaves: list[tuple[tuple, Any]], in_keys: tuple,
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
        for p, v in _leaves(out):
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
        cache_paths = {id(c): p for p, c in _cache_objs(leaves)}
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


class _NotReplicable(Exception):
    pass


def _rebuild(obj: Any, leaf: Any) -> Any:
    """*obj* with every non-container leaf replaced by ``leaf(path, value)`` (plain tuples, lists, dicts)."""
    def go(o: Any, path: tuple) -> Any:
        if isinstance(o, (tuple, list)):
            return type(o)(go(x, (*path, i)) for i, x in enumerate(o))
        if isinstance(o, dict):
            return {k: go(x, (*path, k)) for k, x in o.items()}
        return leaf(path, o)
    return go(obj, ())


class Folder:
    """Folds the groups of one capture: installed as each member's ``forward`` for the capture's duration.
    *cap* is the dispatch capture (its builder ``b``, ``refs``, ``names``, ``depth``, ``n_unknown``, ``dd``,
    ``q``); *known* maps the names of graph inputs, parameters and buffers to their specs."""

    def __init__(self, root: torch.nn.Module, cap: Any, known: dict[str, TensorSpec]):
        self.cap = cap
        self.known = known
        self.groups = fold_groups(root, cap.names)
        self.recording: list[tuple[Any, tuple, dict]] | None = None
        self._installed: list[tuple[torch.nn.Module, bool, Any]] = []
        self._caches: dict[int, tuple[Any, bool, Any]] = {}
        self._params: dict[int, dict[str, str]] = {}
        self.summary_rows: list[dict[str, Any]] = []

    # -- setup ----------------------------------------------------------------------------------------------
    def install(self) -> None:
        for g in self.groups:
            for m in g.members:
                mod = m.module
                had = "forward" in vars(mod)
                fwd = mod.forward
                mod.forward = self._wrap(m, fwd)
                self._installed.append((mod, had, fwd))

    def uninstall(self) -> None:
        for mod, had, fwd in self._installed:
            if had:
                mod.forward = fwd
            else:
                del mod.forward
        self._installed.clear()
        for c, had, upd in self._caches.values():
            if had:
                c.update = upd
            else:
                del c.update
        self._caches.clear()
        self._params.clear()
        self.summary_rows = self.summary()
        for g in self.groups:  # drop the recordings (fake tensors, caches) and the group <-> member cycles now
            g.first = g.template = None
            g.members = []

    def _wrap(self, m: Member, fwd: Any) -> Any:
        def forward(*args: Any, **kwargs: Any) -> Any:
            return self.call(m, fwd, args, kwargs)
        return forward

    def _hook_cache(self, cache: Any) -> None:
        """Record the ``update`` calls a recorded block makes on *cache*."""
        if id(cache) in self._caches:
            return
        had = "update" in vars(cache)
        orig = cache.update

        def update(*args: Any, **kwargs: Any) -> Any:
            if self.recording is not None and not self.cap.depth:
                self.recording.append((cache, args, kwargs))
            return orig(*args, **kwargs)

        cache.update = update
        self._caches[id(cache)] = (cache, had, orig)

    def param_names(self, m: Member) -> dict[str, str]:
        """``relative name -> graph tensor name`` of *m*'s parameters and buffers."""
        got = self._params.get(id(m))
        if got is None:
            refs = self.cap.refs
            got = {}
            for rel, t in (*m.module.named_parameters(remove_duplicate=False),
                           *m.module.named_buffers(remove_duplicate=False)):
                r = refs.get(t)
                if r is not None:
                    got.setdefault(rel, r.name)
            self._params[id(m)] = got
        return got

    def summary(self) -> list[dict[str, Any]]:
        return [{"blocks": g.label(), "traced": g.traced, "replicated": g.replicated,
                 **({"not_folded": g.failed} if g.failed else {})} for g in self.groups]

    # -- a member's forward ----------------------------------------------------------------------------------
    def call(self, m: Member, fwd: Any, args: tuple, kwargs: dict) -> Any:
        g, cap = m.group, self.cap
        m.calls += 1
        if cap.depth or self.recording is not None or g.failed or m.calls > 1 or len(cap.q.dtypes):
            g.traced += 1
            return fwd(*args, **kwargs)
        if g.first is None or g.template is None or m is g.members[-1]:
            out, rec = self._trace(m, fwd, args, kwargs)
            g.traced += 1
            if g.first is None:
                g.first = rec
                g.failed = rec.reason
            elif g.template is None:
                rec.final = unify(g.first, rec)
                if rec.final is None:
                    g.failed = rec.reason or f"{g.first.member.prefix} and {m.prefix} trace differently"
                else:
                    g.template = rec
            elif unify(g.template, rec) != g.template.final:
                if g.replicated:
                    raise FoldMismatch(f"{m.prefix} traces differently from {g.template.member.prefix}")
                g.failed = f"{m.prefix} traces differently from {g.template.member.prefix}"
            return out
        try:
            out = self._replicate(m, args, kwargs)
        except _NotReplicable:
            g.traced += 1
            return fwd(*args, **kwargs)
        g.replicated += 1
        return out

    def _trace(self, m: Member, fwd: Any, args: tuple, kwargs: dict) -> tuple[Any, Recording]:
        cap = self.cap
        graph = cap.b.graph
        leaves = list(_leaves((args, kwargs)))
        in_keys = tuple((p, _leaf_key(v)) for p, v in leaves)
        caches = [v for _, v in _cache_objs(leaves)]
        for c in caches:
            self._hook_cache(c)
        mods = list(m.module.modules())
        before = _snapshot(mods, caches)
        n0, unk0, dd0 = len(graph), cap.n_unknown, len(cap.dd.names)
        self.recording = []
        try:
            out = fwd(*args, **kwargs)
        finally:
            updates, self.recording = self.recording, None
        reason = ""
        if len(cap.dd.names) != dd0 or len(cap.q.dtypes):
            reason = "data-dependent sizes or quantized tensors inside the block"
        after = _snapshot(mods, caches)
        if after[0] != before[0]:
            reason = reason or "the block changes its own attributes"
        for c, (top0, lay0), (top1, lay1) in zip(caches, before[1], after[1]):
            touched = {i for i, (a, b) in enumerate(zip(lay0, lay1)) if a != b}
            said = {a[2] if len(a) > 2 else k.get("layer_idx") for cc, a, k in updates if cc is c}
            if top0 != top1 or len(lay0) != len(lay1) or not touched <= said:
                reason = reason or "the block changes its cache beyond its updates"
        if tuple((p, _leaf_key(v)) for p, v in leaves) != in_keys:
            reason = reason or "the block changes its inputs' shapes in place"
        names = list(islice(graph.nx.nodes, n0, None))
        return out, Recording(self, m, leaves, in_keys, names, out, updates, unk0, reason)

    # -- replication -----------------------------------------------------------------------------------------
    def _fresh(self, key: tuple) -> torch.Tensor:
        _, shape, stride, dtype, device = key
        return torch.empty_strided(shape, stride, dtype=dtype, device=device)

    def _replicate(self, m: Member, args: tuple, kwargs: dict) -> Any:
        t = m.group.template
        assert t is not None and t.final is not None
        cap = self.cap
        leaves = list(_leaves((args, kwargs)))
        if tuple((p, _leaf_key(v)) for p, v in leaves) != t.in_keys:
            raise _NotReplicable
        plan = t.plan()
        at = dict(leaves)
        params = self.param_names(m)
        unk0 = cap.n_unknown
        ext: dict[tuple, str] = {}
        for tok, raw in plan.externals:
            ext[tok] = self._external(tok, raw, m, at, params, unk0)
        layers = []
        for tok in plan.layers:
            if tok[0] == "lidx":
                if tok[1] not in m.index:
                    raise _NotReplicable
                layers.append(m.index[tok[1]])
            else:
                layers.append(tok[1])
        # nothing can fail from here on: append the nodes
        graph, fresh = cap.b.graph, cap.b.fresh
        new: list[str] = []

        def name_of(d: Any) -> Any:
            if d is None:
                return None
            if d[0] == "x":
                return ext[d[1]]
            return new[d[1]] if d[2] is None else f"{new[d[1]]}:{d[2]}"

        for base, op, kind, rel, ins, outs in plan.nodes:
            name = fresh(base)
            new.append(name)
            scope = (m.prefix + "." + rel if rel else m.prefix) if kind == "rel" else rel
            graph.add_op(OpNode(name, op.op, op.inputs, op.outputs, op.attrs, scope),
                         [name_of(d) for d in ins], [name_of(d) for d in outs])
        cap.n_unknown += t.n_const
        leaf_names = iter([name_of(d) for d in plan.leaves])
        leaf_specs = iter(plan.leaf_specs)
        arg_names = {cap.refs[x].name: p for p, x in leaves if isinstance(x, torch.Tensor) and x in cap.refs}
        cap.depth += 1
        try:
            for (path, where, kk, vk, a, kw), layer in zip(t.updates, layers):
                a2, kw2 = list(a), dict(kw)
                a2[0], a2[1] = self._fresh(kk), self._fresh(vk)
                if where == 2:
                    a2[2] = layer
                else:
                    kw2["layer_idx"] = layer
                _cache_at(at, path).update(*a2, **kw2)

            def leaf(path: tuple, v: Any) -> Any:
                if isinstance(v, torch.Tensor):
                    key, spec = next(leaf_specs)
                    nm = next(leaf_names)
                    if nm in arg_names:  # the block hands back one of its inputs
                        return at[arg_names[nm]]
                    out = self._fresh(key)
                    cap.refs[out] = Ref(spec, nm)
                    return out
                if path in plan.arg_objs:
                    return at[plan.arg_objs[path]]
                return v

            return _rebuild(t.out, leaf)
        finally:
            cap.depth -= 1

    def _external(self, tok: tuple, raw: tuple | None, m: Member, at: dict, params: dict[str, str],
                  unk0: int) -> str:
        """The name, in member *m*, of the tensor the template reads as *tok* (*raw*: its token there)."""
        kind = tok[0]
        if kind == "arg":
            r = self.cap.refs.get(at[tok[1]])
            if r is None:
                raise _NotReplicable
            return r.name
        if kind == "param":
            if tok[1] not in params:
                raise _NotReplicable
            return params[tok[1]]
        if kind == "ext":
            return tok[1]
        if kind == "const":
            return f"const_{unk0 + tok[1]}"
        if kind == "idx":
            if tok[2] not in m.index:
                raise _NotReplicable
            name = "".join(str(m.index[tok[2]]) if x is None else x for x in tok[1])
            spec = self.known.get(name)
            if spec is None or raw is None or raw[0] != "ext" or spec != self.known.get(raw[1]):
                raise _NotReplicable
            return name
        raise _NotReplicable
