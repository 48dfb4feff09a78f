"""Which blocks of a model are identical: the groups :mod:`graphroof.frontends.torch.fold` traces a few times and
replicates (see its docstring for what :func:`block_signature` compares)."""

from __future__ import annotations

import functools
import types
from itertools import islice
from typing import Any

import torch

__all__ = ["MIN_GROUP", "INDEX_ATTRS", "PRIMITIVE", "Member", "Group", "block_signature", "fold_groups"]

#: smallest group worth folding: two traced, one checked at the end, at least one replicated
MIN_GROUP = 4
#: attributes that number a block (they differ between otherwise identical layers)
INDEX_ATTRS = frozenset({"layer_idx", "layer_id", "layer_index", "layer_number", "layer_num", "block_idx",
                         "block_id", "block_index"})
PRIMITIVE = (type(None), bool, int, float, str, complex)
_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
               "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs")

#: the attributes every nn.Module has (bookkeeping, not behaviour; the hook dicts are checked separately)
_MODULE_KEYS = frozenset(vars(torch.nn.Module()))

# -- which blocks are identical ---------------------------------------------------------------------------

def _plain(v: Any, configs: list[Any]) -> Any:
    """A hashable stand-in for an attribute value: primitives by value, other objects by identity."""
    if isinstance(v, PRIMITIVE):
        return v
    if isinstance(v, (torch.dtype, torch.device)):
        return str(v)
    if isinstance(v, (tuple, list)) and all(isinstance(x, PRIMITIVE) for x in v):
        return (type(v).__name__, tuple(v))
    if isinstance(v, torch.Tensor):
        return ("tensor", tuple(v.shape), str(v.dtype), v.device.type)
    if type(v).__name__.endswith("Config") and hasattr(v, "to_dict"):
        configs.append(v)
    if isinstance(v, functools.partial):  # e.g. partial(F.gelu, approximate="tanh"), one per module
        return ("partial", _plain(v.func, configs), tuple(_plain(a, configs) for a in v.args),
                tuple(sorted((k, _plain(x, configs)) for k, x in v.keywords.items())))
    if isinstance(v, types.FunctionType):  # a function made per module: the same code over the same values
        cells = tuple(_plain(c.cell_contents, configs) for c in v.__closure__ or ())
        return ("function", id(v.__code__), id(v.__globals__), cells,
                tuple(_plain(d, configs) for d in v.__defaults__ or ()))
    return ("id", id(v))


def _per_layer_entries(cfg: Any, n: int, idx: int) -> tuple[Any, ...]:
    """``(name, value)`` of every list in *cfg* with one entry per layer (``layer_types`` ...), at layer *idx*."""
    out = []
    for k, v in sorted(vars(cfg).items()):
        if isinstance(v, (list, tuple)) and len(v) == n and 0 <= idx < n:
            x = v[idx]
            out.append((k, x if isinstance(x, PRIMITIVE) else repr(x)))
    return tuple(out)


def block_signature(block: torch.nn.Module, n_layers: int, position: int) -> tuple[tuple[Any, ...], dict]:
    """``(signature, index_values)`` of *block*, the *position*-th of *n_layers*: equal signatures mean the
    same structure and behaviour-relevant attributes; *index_values* holds what numbers the block
    (``("index",)``: its position, ``(path, attr)``: ``layer_idx``-like attributes)."""
    parts: list[Any] = []
    index: dict[tuple[str, ...], int] = {("index",): position}
    configs: list[Any] = []
    for rel, m in block.named_modules(remove_duplicate=False):
        parts.append((rel, type(m)))
        for k, v in vars(m).items():
            if k in ("_parameters", "_buffers"):
                parts.append((k, tuple((n, None if t is None else (tuple(t.shape), str(t.dtype), type(t)))
                                       for n, t in v.items())))
            elif k == "_modules" or k == "training":
                continue
            elif k in _HOOK_DICTS:
                if v:
                    parts.append((rel, k, ("id", id(block))))  # a hooked block: never equal to another
            elif k in _MODULE_KEYS:
                continue
            elif k in INDEX_ATTRS and isinstance(v, int):
                index[(rel, k)] = v
            else:
                parts.append((rel, k, _plain(v, configs)))
    layer = next((v for k, v in index.items() if k[-1] in INDEX_ATTRS), position)
    seen: set[int] = set()
    for cfg in configs:
        if id(cfg) not in seen:
            seen.add(id(cfg))
            parts.append(("config", _per_layer_entries(cfg, n_layers, layer)))
    return tuple(parts), index


class Member:
    """One block of a group: the module, its place and its index values."""

    __slots__ = ("module", "group", "position", "prefix", "index", "calls")

    def __init__(self, module: torch.nn.Module, group: Group, position: int, prefix: str, index: dict):
        self.module, self.group, self.position, self.prefix, self.index = module, group, position, prefix, index
        self.calls = 0


class Group:
    """Identical members of one container (in container order)."""

    def __init__(self, container: str):
        self.container = container
        self.members: list[Member] = []
        self.first: Any = None      # the first member traced (a fold.Recording)
        self.template: Any = None   # the second, replicated from (a fold.Recording)
        self.failed = ""                        # why the group does not fold
        self.replicated = 0
        self.traced = 0

    def label(self) -> str:
        first, last = self.members[0].position, self.members[-1].position
        return f"{self.container}.[{first}..{last}] ({len(self.members)} blocks)"


def fold_groups(root: torch.nn.Module, names: dict[int, str]) -> list[Group]:
    """The foldable groups of *root*: outermost containers first; a container inside a folded block is left
    to its block."""
    groups: list[Group] = []
    taken: list[str] = []
    for path, mod in root.named_modules():
        if not isinstance(mod, (torch.nn.ModuleList, torch.nn.Sequential)) or len(mod) < MIN_GROUP:
            continue
        if any(path == t or path.startswith(t + ".") for t in taken):
            continue
        kids = list(mod)
        if len({id(k) for k in kids}) != len(kids) or not all(len(list(islice(k.modules(), 3))) == 3 for k in kids):
            continue  # a block used twice, or plain layers (a Sequential of conv / relu): not blocks; a block holds
            # at least two modules (T5's block holds one ModuleList of its sublayers)
        by_sig: dict[Any, Group] = {}
        for i, k in enumerate(kids):
            sig, index = block_signature(k, len(kids), i)
            g = by_sig.setdefault(sig, Group(path))
            g.members.append(Member(k, g, i, names.get(id(k), f"{path}.{i}"), index))
        found = [g for g in by_sig.values() if len(g.members) >= MIN_GROUP]
        if found:
            taken.append(path)
            groups.extend(found)
    return groups
