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

from itertools import islice
from typing import Any

import torch

from ...graph import OpNode, TensorSpec
from .blocks import MIN_GROUP, Member, block_signature, fold_groups
from .common import Ref
from .recording import (
    NotReplicable,
    Recording,
    cache_at,
    cache_objects,
    leaf_keys,
    rebuild_tree,
    take_snapshot,
    tree_leaves,
    unify,
)

__all__ = ["Folder", "FoldMismatch", "block_signature", "fold_groups", "MIN_GROUP"]


class FoldMismatch(RuntimeError):
    """The last member of a group traced differently from the template after members were replicated."""




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
        except NotReplicable:
            g.traced += 1
            return fwd(*args, **kwargs)
        g.replicated += 1
        return out

    def _trace(self, m: Member, fwd: Any, args: tuple, kwargs: dict) -> tuple[Any, Recording]:
        cap = self.cap
        graph = cap.b.graph
        leaves = list(tree_leaves((args, kwargs)))
        in_keys = leaf_keys(leaves)
        caches = [v for _, v in cache_objects(leaves)]
        for c in caches:
            self._hook_cache(c)
        mods = list(m.module.modules())
        before = take_snapshot(mods, caches)
        n0, unk0, dd0 = len(graph), cap.n_unknown, len(cap.dd.names)
        self.recording = []
        try:
            out = fwd(*args, **kwargs)
        finally:
            updates, self.recording = self.recording, None
        reason = ""
        if len(cap.dd.names) != dd0 or len(cap.q.dtypes):
            reason = "data-dependent sizes or quantized tensors inside the block"
        after = take_snapshot(mods, caches)
        if after[0] != before[0]:
            reason = reason or "the block changes its own attributes"
        for c, (top0, lay0), (top1, lay1) in zip(caches, before[1], after[1]):
            touched = {i for i, (a, b) in enumerate(zip(lay0, lay1)) if a != b}
            said = {a[2] if len(a) > 2 else k.get("layer_idx") for cc, a, k in updates if cc is c}
            if top0 != top1 or len(lay0) != len(lay1) or not touched <= said:
                reason = reason or "the block changes its cache beyond its updates"
        if leaf_keys(leaves) != in_keys:
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
        leaves = list(tree_leaves((args, kwargs)))
        if leaf_keys(leaves) != t.in_keys:
            raise NotReplicable
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
                    raise NotReplicable
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
                cache_at(at, path).update(*a2, **kw2)

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

            return rebuild_tree(t.out, leaf)
        finally:
            cap.depth -= 1

    def _external(self, tok: tuple, raw: tuple | None, m: Member, at: dict, params: dict[str, str],
                  unk0: int) -> str:
        """The name, in member *m*, of the tensor the template reads as *tok* (*raw*: its token there)."""
        kind = tok[0]
        if kind == "arg":
            r = self.cap.refs.get(at[tok[1]])
            if r is None:
                raise NotReplicable
            return r.name
        if kind == "param":
            if tok[1] not in params:
                raise NotReplicable
            return params[tok[1]]
        if kind == "ext":
            return tok[1]
        if kind == "const":
            return f"const_{unk0 + tok[1]}"
        if kind == "idx":
            if tok[2] not in m.index:
                raise NotReplicable
            name = "".join(str(m.index[tok[2]]) if x is None else x for x in tok[1])
            spec = self.known.get(name)
            if spec is None or raw is None or raw[0] != "ext" or spec != self.known.get(raw[1]):
                raise NotReplicable
            return name
        raise NotReplicable
